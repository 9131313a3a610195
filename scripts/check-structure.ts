// The structure rules of docs/development.md, checked on the tree (run by test/structure.test.ts):
// no function a reader has to scroll or call with a row of positional arguments, layers that point
// one way, wall time read only through the clock, pixels reached only through the image module.
// `node --import tsx scripts/check-structure.ts` prints every finding; `--counts` prints the tallies.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from '@babel/parser';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const MAX_FUNCTION_LINES = 80;
export const MAX_POSITIONAL_PARAMETERS = 4;
/** Folders whose code takes the time from `src/clock.ts` (a test server's clock then moves all of it). */
const CLOCKED = ['src/jobs/', 'src/webhooks/', 'src/server/'];
/** The only folders that may open pixels with sharp. */
const PIXEL_DOORS = ['workers/image/', 'workers/decoders/'];

export interface Finding {
  rule: 'long-function' | 'positional-parameters' | 'src-imports-workers' | 'wall-time' | 'sharp-outside-image';
  file: string;
  line: number;
  text: string;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return /\.(ts|mts)$/.test(name) && !name.endsWith('.d.ts') ? [path] : [];
  });
}

interface Node {
  type: string;
  loc: { start: { line: number } ; end: { line: number } };
  [key: string]: unknown;
}

const FUNCTIONS = new Set(['FunctionDeclaration', 'FunctionExpression', 'ArrowFunctionExpression', 'ClassMethod', 'ClassPrivateMethod', 'ObjectMethod']);

const isNode = (value: unknown): value is Node => typeof value === 'object' && value !== null && typeof (value as Node).type === 'string' && 'loc' in value;

function keyName(key: unknown): string | undefined {
  if (!isNode(key)) return undefined;
  if (key.type === 'Identifier' || key.type === 'PrivateName') return String((key.id as Node | undefined)?.name ?? key.name);
  if (key.type === 'StringLiteral') return String(key.value);
  return undefined;
}

function functionName(node: Node, parent: Node | undefined): string {
  const own = keyName(node.id) ?? keyName(node.key);
  if (node.kind === 'constructor') return 'constructor';
  if (own) return own;
  if (parent && (parent.type === 'VariableDeclarator' || parent.type === 'ClassProperty' || parent.type === 'ObjectProperty')) {
    return keyName(parent.id) ?? keyName(parent.key) ?? '(anonymous)';
  }
  return '(anonymous)';
}

const isDate = (node: unknown) => isNode(node) && node.type === 'Identifier' && node.name === 'Date';

function checkFile(path: string, root: string): Finding[] {
  const file = relative(root, path).split(sep).join('/');
  const ast = parse(readFileSync(path, 'utf8'), { sourceType: 'module', plugins: ['typescript'] });
  const findings: Finding[] = [];
  const add = (rule: Finding['rule'], node: Node, text: string) => findings.push({ rule, file, line: node.loc.start.line, text });
  const pixelDoor = PIXEL_DOORS.some((d) => file.startsWith(d));
  const clocked = CLOCKED.some((d) => file.startsWith(d));

  const importOf = (node: Node, spec: string) => {
    if (file.startsWith('src/') && spec.startsWith('.') && relative(root, resolve(dirname(path), spec)).split(sep)[0] === 'workers') add('src-imports-workers', node, spec);
    if (spec === 'sharp' && !pixelDoor) add('sharp-outside-image', node, spec);
  };

  const visit = (node: Node, parent: Node | undefined) => {
    if (FUNCTIONS.has(node.type) && node.body) {
      const lines = node.loc.end.line - node.loc.start.line + 1;
      const name = functionName(node, parent);
      if (lines > MAX_FUNCTION_LINES) add('long-function', node, `${name}: ${lines} lines`);
      const params = (node.params as Node[]).filter((p) => !(p.type === 'Identifier' && p.name === 'this'));
      if (params.length > MAX_POSITIONAL_PARAMETERS) add('positional-parameters', node, `${name}: ${params.length} parameters`);
    }
    if ((node.type === 'ImportDeclaration' || node.type === 'ExportNamedDeclaration' || node.type === 'ExportAllDeclaration') && isNode(node.source)) {
      importOf(node, String(node.source.value));
    }
    // Babel 7 gives a dynamic import as a call of `Import`.
    const dynamic = node.type === 'CallExpression' && isNode(node.callee) && node.callee.type === 'Import' ? (node.arguments as Node[])[0] : undefined;
    if (dynamic?.type === 'StringLiteral') importOf(node, String(dynamic.value));
    if (clocked) {
      const callee = node.callee as Node | undefined;
      const nowCall = node.type === 'CallExpression' && callee?.type === 'MemberExpression' && isDate(callee.object) && keyName(callee.property) === 'now';
      const newDate = node.type === 'NewExpression' && isDate(callee) && (node.arguments as unknown[]).length === 0;
      if (nowCall) add('wall-time', node, 'Date.now()');
      if (newDate) add('wall-time', node, 'new Date()');
    }
    for (const [key, value] of Object.entries(node)) {
      if (key === 'loc' || key.endsWith('Comments')) continue;
      if (Array.isArray(value)) for (const child of value) isNode(child) && visit(child, node);
      else if (isNode(value)) visit(value, node);
    }
  };
  visit(ast.program as unknown as Node, undefined);
  return findings;
}

/**
 * Every finding in `src/` and `workers/` (or in the files given). Paths are read relative to `root`,
 * the repository's unless a test points it at a tree of its own.
 */
export function checkStructure(files?: string[], root = ROOT): Finding[] {
  return (files ?? ['src', 'workers'].flatMap((d) => sourceFiles(join(root, d)))).flatMap((path) => checkFile(path, root));
}

/** One line per finding: `file:line  rule  text`. */
export const describeFinding = (f: Finding) => `${f.file}:${f.line}  ${f.rule}  ${f.text}`;

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2).filter((a) => a !== '--counts');
  const findings = checkStructure(args.length ? args.flatMap((a) => (statSync(a).isDirectory() ? sourceFiles(resolve(a)) : [resolve(a)])) : undefined);
  if (process.argv.includes('--counts')) {
    const counts: Record<string, number> = {};
    for (const f of findings) counts[f.rule] = (counts[f.rule] ?? 0) + 1;
    console.log(JSON.stringify(counts));
  } else for (const f of findings) console.log(describeFinding(f));
  process.exitCode = findings.length ? 1 : 0;
}
