// The structure rules of docs/development.md hold on the tree (scripts/check-structure.ts), and the
// checker can fail: each rule is shown a small file that breaks it and one that keeps it.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { checkStructure, describeFinding, MAX_FUNCTION_LINES, type Finding } from '../scripts/check-structure.ts';

it('src/ and workers/ keep the structure rules: no findings', () => {
  const findings = checkStructure();
  assert.equal(findings.length, 0, `${findings.length} findings:\n${findings.map(describeFinding).join('\n')}`);
});

/** A function of exactly `lines` lines, starting on the file's first line. */
function functionOf(lines: number): string {
  const body = Array.from({ length: lines - 3 }, (_, i) => `  const v${i} = ${i};`);
  return ['export function long(): number {', ...body, '  return 0;', '}', ''].join('\n');
}

interface Case {
  name: string;
  /** Where the file sits in the tree: the rules depend on the folder. */
  file: string;
  source: string;
  /** What the checker reports: rule, line, text. */
  finds: [Finding['rule'], number, string][];
}

const CASES: Case[] = [
  { name: `a function of ${MAX_FUNCTION_LINES + 1} lines`, file: 'src/jobs/long.ts', source: functionOf(MAX_FUNCTION_LINES + 1), finds: [['long-function', 1, `long: ${MAX_FUNCTION_LINES + 1} lines`]] },
  { name: `a function of ${MAX_FUNCTION_LINES} lines is fine`, file: 'workers/short.ts', source: functionOf(MAX_FUNCTION_LINES), finds: [] },
  {
    name: 'a function with 5 positional parameters',
    file: 'workers/image/five.ts',
    source: 'export function five(a: number, b: number, c: number, d: number, e: number): number {\n  return a + b + c + d + e;\n}\n',
    finds: [['positional-parameters', 1, 'five: 5 parameters']],
  },
  {
    name: "a constructor's 5 parameter properties",
    file: 'src/accounts/five.ts',
    source: 'export class Five {\n  constructor(private a: number, private b: number, readonly c: number, readonly d: number, e: number) {}\n}\n',
    finds: [['positional-parameters', 2, 'constructor: 5 parameters']],
  },
  {
    name: 'four positional parameters, or an options object, are fine',
    file: 'workers/four.ts',
    source: 'export const four = (a: number, b: number, c: number, d: number) => a + b + c + d;\nexport function options({ a, b, c, d, e }: Record<string, number>) {\n  return a + b + c + d + e;\n}\n',
    finds: [],
  },
  {
    name: 'an import from src/ into workers/',
    file: 'src/jobs/pool.ts',
    source: "import { catalog } from '../catalog/index.ts';\nimport type { Task } from '../../workers/contract.ts';\nexport type { Task };\nexport { catalog };\n",
    finds: [['src-imports-workers', 2, '../../workers/contract.ts']],
  },
  {
    name: 'Date.now() in src/jobs',
    file: 'src/jobs/stamp.ts',
    source: 'export const stamp = () => Date.now();\n',
    finds: [['wall-time', 1, 'Date.now()']],
  },
  {
    name: 'new Date() in src/server, while new Date(x) is fine',
    file: 'src/server/stamp.ts',
    source: 'export const parsed = (iso: string) => new Date(iso);\nexport const stamp = () => new Date();\n',
    finds: [['wall-time', 2, 'new Date()']],
  },
  {
    name: 'Date.now() outside the clocked folders is fine',
    file: 'src/cli/stamp.ts',
    source: 'export const stamp = () => Date.now();\n',
    finds: [],
  },
  {
    name: 'import sharp in workers/pdf/',
    file: 'workers/pdf/pixels.ts',
    source: "import sharp from 'sharp';\nexport const open = (path: string) => sharp(path);\n",
    finds: [['sharp-outside-image', 1, 'sharp']],
  },
  {
    name: "import('sharp') in workers/preview/",
    file: 'workers/preview/lazy.ts',
    source: "export const open = async (path: string) => (await import('sharp')).default(path);\n",
    finds: [['sharp-outside-image', 1, 'sharp']],
  },
  {
    name: 'a dynamic import from src into workers',
    file: 'src/jobs/late.ts',
    source: "export const load = () => import('../../workers/jpg.ts');\n",
    finds: [['src-imports-workers', 1, '../../workers/jpg.ts']],
  },
  {
    name: 'import sharp in workers/image/ is fine',
    file: 'workers/image/door.ts',
    source: "import sharp from 'sharp';\nexport const open = (path: string) => sharp(path);\n",
    finds: [],
  },
];

describe('each rule fails a file that breaks it, on a tree of its own', () => {
  let root: string;
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'compressd-structure-'));
  });
  after(() => rm(root, { recursive: true, force: true }));

  for (const c of CASES) {
    it(c.name, async () => {
      const path = join(root, c.file);
      await mkdir(dirname(path), { recursive: true });
      await writeFile(path, c.source);
      const found = checkStructure([path], root);
      assert.deepEqual(
        found.map((f) => [f.rule, f.line, f.text]),
        c.finds,
        found.map(describeFinding).join('\n'),
      );
      assert.ok(found.every((f) => f.file === c.file));
    });
  }
});
