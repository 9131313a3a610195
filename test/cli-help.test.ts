// The command line's help (issue 29, finding 10): every setting and every environment variable the
// source reads is listed, and no line of any help is wider than 80 columns.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { ENVIRONMENT_ONLY, SETTINGS } from '../src/config.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

async function help(...args: string[]): Promise<string> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'src/main.ts', ...args], { cwd: ROOT });
  return stdout;
}

/** Every environment variable named in the server's source. */
function variablesInSource(): Set<string> {
  const names = new Set<string>();
  const visit = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) visit(path);
      else if (entry.name.endsWith('.ts')) for (const [name] of readFileSync(path, 'utf8').matchAll(/\b(?:COMPRESSD|AWS)_[A-Z0-9_]+\b|\bNODE_EXTRA_CA_CERTS\b/g)) names.add(name);
    }
  };
  visit(join(ROOT, 'src'));
  return names;
}

describe('serve --help', () => {
  test('lists every setting of the config table as its flag and environment twin, and every variable with no flag', async () => {
    const text = await help('serve', '--help');
    for (const s of SETTINGS) assert.match(text, new RegExp(`^  --${s.flag}(?: \\S+)? +${s.env}$`, 'm'), `--${s.flag} with ${s.env}`);
    for (const v of ENVIRONMENT_ONLY) for (const name of v.names) assert.match(text, new RegExp(`^  ${name}$`, 'm'), name);
    for (const name of ['COMPRESSD_LOG_LEVEL', 'COMPRESSD_CACHE_DIR', 'COMPRESSD_S3_FORCE_PATH_STYLE', 'NODE_EXTRA_CA_CERTS']) assert.ok(text.includes(name), name);
    assert.match(text, /^ {2}--trust-proxy HOPS\|CIDR,… +COMPRESSD_TRUST_PROXY$/m);
  });

  test('every environment variable the source reads is in the help', async () => {
    const text = await help('serve', '--help');
    const source = variablesInSource();
    assert.ok(source.has('COMPRESSD_LOG_LEVEL') && source.has('AWS_REGION'), 'the scan finds the variables');
    for (const name of source) assert.ok(text.includes(name), `${name} is read by src/ but missing from serve --help`);
  });
});

describe('help fits a terminal', () => {
  for (const args of [['--help'], ['serve', '--help'], ['compress', '--help']]) {
    test(`compressd ${args.join(' ')}: no line reaches 80 columns`, async () => {
      const text = await help(...args);
      assert.ok(text.length > 200, 'the help is printed on stdout');
      for (const line of text.split('\n')) assert.ok([...line].length < 80, `${[...line].length} columns: ${line}`);
    });
  }
});
