// Issue 43: moving code must not move bytes. Every corpus file's output (or failure code) with
// default options is held to the recorded table; a change meant to alter a codec re-records it
// with `node --import tsx scripts/corpus-outputs.ts --write` and says so in its commit.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { corpusOutputs, GOLDEN } from '../scripts/corpus-outputs.ts';

test('every corpus output is byte-identical to the recorded one (and every failure has its code)', async () => {
  const expected = (await readFile(GOLDEN, 'utf8')).split('\n');
  const actual = (await corpusOutputs()).split('\n');
  const changed = actual.filter((row) => !expected.includes(row));
  const missing = expected.filter((row) => !actual.includes(row));
  assert.deepEqual({ changed, missing }, { changed: [], missing: [] });
});
