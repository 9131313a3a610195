// src/durable/journal.ts: start-up reads record by record; online compaction loses nothing, at any
// crash point, and keeps a log near the size of its live records.
import assert from 'node:assert/strict';
import { appendFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { frame } from '../src/durable/framing.ts';
import { Journal, type CompactionStep } from '../src/durable/journal.ts';

/** A key-value model: a `set` record replaces a key's value, a `del` removes it. */
type Rec = { k: string; v?: string };
const dirs: string[] = [];
after(() => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

async function tempLog(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'compressd-journal-'));
  dirs.push(dir);
  return join(dir, 'test.log');
}

class Model {
  readonly state = new Map<string, string>();
  constructor(readonly journal: Journal<Rec>) {
    journal.replay((r) => this.apply(r));
  }
  apply(r: Rec): void {
    if (r.v === undefined) this.state.delete(r.k);
    else this.state.set(r.k, r.v);
  }
  write(r: Rec): Promise<void> {
    this.apply(r);
    return this.journal.append(r);
  }
  snapshot = (): Rec[] => [...this.state].map(([k, v]) => ({ k, v }));
}

function reread(path: string): Map<string, string> {
  const j = new Journal<Rec>(path, { sync: false });
  const state = new Model(j).state;
  void j.close();
  return state;
}

describe('journal: reading at start-up', () => {
  it('reads records across chunk edges, one longer than a chunk, multi-byte text, and leaves a torn tail for later', async () => {
    const path = await tempLog();
    const long = 'é'.repeat(1_200_000);
    const records: Rec[] = [];
    for (let i = 0; i < 30_000; i++) records.push({ k: `k${i}`, v: i % 7 === 0 ? `ü${i}€` : String(i) });
    records.splice(15_000, 0, { k: 'long', v: long });
    writeFileSync(path, records.map(frame).join('') + '\n{"k":"torn"');
    const seen: Rec[] = [];
    const j = new Journal<Rec>(path, { sync: false });
    assert.deepEqual(j.replay((r) => seen.push(r)), { records: records.length, skipped: 0 });
    assert.deepEqual(seen, records);
    appendFileSync(path, ',"v":"x"}\n');
    assert.deepEqual(j.readNew(), { records: [{ k: 'torn', v: 'x' }], skipped: 0 });
    await j.close();
  });

  it('skips a torn record followed by later ones', async () => {
    const path = await tempLog();
    writeFileSync(path, `${frame({ k: 'a', v: '1' })}\n{"k":"b","v${frame({ k: 'c', v: '3' })}`);
    const j = new Journal<Rec>(path, { sync: false });
    assert.deepEqual(j.readNew(), { records: [{ k: 'a', v: '1' }, { k: 'c', v: '3' }], skipped: 1 });
    await j.close();
  });
});

describe('journal: online compaction', () => {
  it('keeps every append made while it runs, and the log ends near the size of its live records', async () => {
    const path = await tempLog();
    const m = new Model(new Journal<Rec>(path, { sync: false }));
    m.journal.compactWhen({ ratio: 2, minRecords: 200, live: () => m.state.size, snapshot: m.snapshot });
    const writes: Promise<void>[] = [];
    // Keys churn: most records soon die (overwritten or deleted), 100 stay live.
    for (let i = 0; i < 20_000; i++) {
      writes.push(m.write({ k: `k${i % 300}`, v: `v${i}` }));
      if (i % 3 === 0) writes.push(m.write({ k: `k${(i + 150) % 300}` }));
      if (i % 1000 === 0) await Promise.all(writes.splice(0));
    }
    await Promise.all(writes);
    await m.journal.idle();
    await m.journal.close();
    assert.deepEqual(reread(path), m.state);
    const liveBytes = m.snapshot().map(frame).join('').length;
    assert.ok(statSync(path).size <= Math.max(2 * liveBytes, 200 * frame({ k: 'k000', v: 'v00000' }).length), `${statSync(path).size} B for ${liveBytes} B live`);
  });

  it('an explicit compaction taken while appends are queued keeps them all, in order', async () => {
    const path = await tempLog();
    const m = new Model(new Journal<Rec>(path, { sync: false }));
    for (let i = 0; i < 500; i++) void m.write({ k: `a${i % 50}`, v: `${i}` });
    const compacted = m.journal.compact(m.snapshot);
    const later = Array.from({ length: 500 }, (_, i) => m.write({ k: `a${i % 70}`, v: `later${i}` }));
    await Promise.all([compacted, ...later]);
    await m.journal.close();
    assert.deepEqual(reread(path), m.state);
  });

  for (const step of ['compact.written', 'compact.swapped'] satisfies CompactionStep[]) {
    it(`a crash at ${step} loses nothing that was acknowledged, and leaves no temporary file`, async () => {
      const path = await tempLog();
      const base = new Model(new Journal<Rec>(path, { sync: false }));
      for (let i = 0; i < 300; i++) await base.write({ k: `k${i % 40}`, v: `${i}` });
      await base.journal.close();

      const j = new Journal<Rec>(path, { sync: true, step: (s) => { if (s === step) throw new Error(`killed at ${s}`); } });
      const m = new Model(j);
      const acked = new Map(m.state);
      const compaction = j.compact(m.snapshot);
      const writes = Array.from({ length: 200 }, (_, i) => {
        const r = { k: `k${i % 60}`, v: `after${i}` };
        return m.write(r).then(() => acked.set(r.k, r.v));
      });
      await assert.rejects(compaction, new RegExp(`killed at ${step}`));
      await Promise.allSettled(writes);
      // The process is gone: whatever was acknowledged is found by the next one.
      const found = reread(path);
      for (const [k, v] of acked) assert.equal(found.get(k), v, k);
      writeFileSync(`${path}.0123456789ab.tmp`, 'what a killed compaction left');
      const next = new Journal<Rec>(path, { sync: false });
      next.compactWhen({ ratio: 2, minRecords: 0, live: () => 0, snapshot: () => [] });
      assert.deepEqual(readdirSync(join(path, '..')).filter((n) => n.endsWith('.tmp')), [], 'the next owner removes a compaction a crash cut short');
      await next.close();
    });
  }
});
