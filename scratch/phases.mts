import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { profiled } from '../workers/shared/profile.ts';
const [mod, input, runs = '3'] = process.argv.slice(2);
const { compress } = await import(`../workers/${mod}.ts`);
for (let i = 0; i < Number(runs); i++) {
  const dir = mkdtempSync(join(tmpdir(), 'ph-'));
  const t = performance.now();
  const { result, profile } = await profiled(() => compress({ inputPath: input, format: input!.split('.').pop() ?? '', options: {} }, { dir }, { signal: new AbortController().signal, progress: () => {} }));
  const ms = Object.fromEntries(Object.entries(profile.ms).map(([k, v]) => [k, Math.round(v as number)]));
  console.log(Math.round(performance.now() - t), 'ms', JSON.stringify(ms), 'probes', profile.probes, (profile.probePixels/1e6).toFixed(2), 'MP', JSON.stringify(profile.setting), result.bytes ?? result.outputBytes ?? '');
}
