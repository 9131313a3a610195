import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

/**
 * The systemd unit every release bundle carries: the one docs/operating.md shows, and hardened as
 * systemd itself rates it. `systemd-analyze security --offline=true` reads only the file (no
 * running systemd needed); systemd's package is in scripts/apt-packages.txt.
 */

const UNIT = fileURLToPath(new URL('../packaging/compressd.service', import.meta.url));
const OPERATING = fileURLToPath(new URL('../docs/operating.md', import.meta.url));
const ANALYZE = '/usr/bin/systemd-analyze';
const MOST_EXPOSURE = 2.0;

test('docs/operating.md shows the unit file as shipped, byte for byte', () => {
  const blocks = [...readFileSync(OPERATING, 'utf8').matchAll(/^```ini\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
  const units = blocks.filter((b) => b.includes('[Service]'));
  assert.equal(units.length, 1, 'one unit in the docs');
  assert.equal(units[0], readFileSync(UNIT, 'utf8'));
});

test(`systemd-analyze security --offline=true rates the unit ${MOST_EXPOSURE.toFixed(1)} or lower`, (t) => {
  const r = spawnSync(ANALYZE, ['security', '--offline=true', '--no-pager', UNIT], { encoding: 'utf8' });
  assert.ok(!r.error, `${ANALYZE}: ${r.error?.message} (scripts/setup.mjs installs systemd)`);
  const exposure = /Overall exposure level for compressd\.service: (\d+\.\d+)/.exec(r.stdout);
  assert.ok(exposure, r.stdout + r.stderr);
  t.diagnostic(`exposure ${exposure[1]}; still open: ${r.stdout.split('\n').filter((l) => l.startsWith('✗')).map((l) => l.split(/\s+/)[1]).join(', ')}`);
  assert.ok(Number(exposure[1]) <= MOST_EXPOSURE, r.stdout);
  // The settings that keep the service able to work: V8 needs writable executable memory, the API its sockets.
  assert.doesNotMatch(readFileSync(UNIT, 'utf8'), /^(MemoryDenyWriteExecute=yes|PrivateNetwork=yes|ProcSubset=pid)$/m);
});
