import { copyFileSync, mkdirSync, mkdtempSync, realpathSync, renameSync, rmSync, statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { basename, dirname, extname, join, relative, resolve } from 'node:path';
import { compressorForFormat, type JobOptions } from '../catalog/index.ts';
import { ApiError } from '../errors.ts';
import { CompressorPool } from '../jobs/pool.ts';
import { ineffectiveOptions, optionsFor, outputFileName, sameFormat, validateAnyOptions } from '../options.ts';
import { type Command, commandHelp, parseCommand, UsageError } from './command.ts';
import { displayPath, expandInputs, type InputFile, unsupportedReason } from './inputs.ts';
import { PlainReporter, type Reporter, TtyReporter } from './progress.ts';
import { columnsOf, type FileOutcome, outcomeLine, skippedLine, totalLine } from './summary.ts';

export const COMPRESS = {
  name: 'compress',
  synopsis: ['FILE|DIR|GLOB… [--out DIR] [--options JSON]', '[--jobs N] [--in-place]'],
  about:
    "Compresses files offline with the service's compressors: no server, no account, no credits. Directories are walked and globs expanded; files of a format no compressor takes are listed as skipped (hidden files and folders are ignored).",
  options: {
    out: { type: 'string', arg: 'DIR', help: "where outputs go; a directory argument's layout is kept", shownDefault: './compressed' },
    options: {
      type: 'string',
      arg: 'JSON',
      help: 'compression options, as the API takes them (GET /compress/schema); an option applies to the files whose compressor has it, e.g. {"resize":{"enabled":true,"preset":"1080p"}}',
    },
    jobs: { type: 'string', arg: 'N', help: 'files compressed at once', shownDefault: 'the number of CPUs' },
    'in-place': { type: 'boolean', help: 'replace each input by its output; an output of another format (HEIC → JPG) is written beside its input, which is kept' },
  },
  allowPositionals: true,
  notes: 'Each file gets one line as it finishes (ok, FAIL with the reason, or skip), then a total. An input is never overwritten without --in-place. Exit status: 0 when every file was compressed, 1 when any failed, 2 for a usage error.',
} satisfies Command;

const HELP = commandHelp(COMPRESS);

export interface CompressIo {
  /** Lines are laid out for its `columns` (80 when it has none: a pipe, a file). */
  stdout: NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
  stderr: NodeJS.WritableStream & { isTTY?: boolean; columns?: number };
  cwd: string;
}

interface RunSettings {
  outDir: string | null;
  inPlace: boolean;
  options: Record<string, unknown>;
  jobs: number;
}

/** Runs `compressd compress …`; resolves to the process exit status. */
export async function compressCommand(args: string[], io: CompressIo = { stdout: process.stdout, stderr: process.stderr, cwd: process.cwd() }): Promise<number> {
  let parsed: ReturnType<typeof parseRun>;
  try {
    parsed = parseRun(args, io.cwd);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.stderr.write(`compressd compress: ${err.message}\n\n${HELP}`);
    return 2;
  }
  if (!parsed) {
    io.stdout.write(HELP);
    return 0;
  }
  const { settings, positionals } = parsed;
  for (const warning of ineffectiveOptions(settings.options, '--options')) io.stderr.write(`compressd compress: warning: ${warning}\n`);

  const { files, missing, skipped } = await expandInputs(positionals, io.cwd);
  const width = columnsOf(io.stdout);
  const outcomes: FileOutcome[] = missing.map((arg) => ({
    label: arg,
    inputBytes: 0,
    error: { code: 'cli.no_input', detail: 'no such file or directory, or no file matches' },
  }));
  if (!files.length && !missing.length && !skipped.length) {
    io.stderr.write('compressd compress: no file found\n');
    return 1;
  }

  const reporter: Reporter = io.stderr.isTTY ? new TtyReporter(io.stderr, io.stdout) : new PlainReporter(io.stdout);
  for (const s of skipped) reporter.finish(-1, skippedLine({ label: displayPath(s.path, io.cwd), reason: s.reason }, width));
  for (const o of outcomes) reporter.finish(-1, outcomeLine(o, width));
  const run = new OfflineRun(settings, files, reporter, { cwd: io.cwd, width });
  const stop = () => run.abort();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    outcomes.push(...(await run.all()));
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    reporter.close();
  }
  io.stdout.write(`${totalLine(outcomes, skipped.length, settings.outDir && displayPath(settings.outDir, io.cwd), width)}\n`);
  return outcomes.some((o) => o.error) ? 1 : 0;
}

function parseRun(args: string[], cwd: string): { settings: RunSettings; positionals: string[] } | null {
  const parsed = parseCommand(COMPRESS, args);
  if (!parsed) return null;
  const { values, positionals } = parsed;
  if (!positionals.length) throw new UsageError('name at least one file, directory or glob');
  if (values['in-place'] && values.out !== undefined) throw new UsageError('--in-place and --out exclude each other');
  const jobs = values.jobs === undefined ? availableParallelism() : Number(values.jobs);
  if (!Number.isInteger(jobs) || jobs < 1) throw new UsageError('--jobs must be a whole number ≥ 1');
  return {
    positionals,
    settings: {
      outDir: values['in-place'] ? null : resolve(cwd, values.out ?? 'compressed'),
      inPlace: values['in-place'] ?? false,
      options: parseOptions(values.options),
      jobs,
    },
  };
}

/** Checked against the union of every compressor's options, so a misspelt option is an error, not ignored. */
function parseOptions(raw: string | undefined): Record<string, unknown> {
  try {
    return validateAnyOptions(raw, '--options');
  } catch (err) {
    if (err instanceof ApiError) throw new UsageError(err.detail ?? err.code);
    throw err;
  }
}

class OfflineRun {
  private readonly pool: CompressorPool;
  private readonly controller = new AbortController();
  private readonly inputs: Set<string>;
  private readonly claimed = new Set<string>();
  private next = 0;

  constructor(private readonly settings: RunSettings, private readonly files: InputFile[], private readonly reporter: Reporter, private readonly display: { cwd: string; width: number }) {
    this.pool = new CompressorPool(Math.min(settings.jobs, Math.max(1, files.length)));
    this.inputs = new Set(files.map((f) => realpathSync(f.path)));
  }

  abort(): void {
    this.controller.abort('cli.interrupted');
  }

  async all(): Promise<FileOutcome[]> {
    const outcomes: FileOutcome[] = new Array(this.files.length);
    const lane = async () => {
      while (this.next < this.files.length) {
        const i = this.next++;
        outcomes[i] = await this.one(i, this.files[i]);
        this.reporter.finish(i, outcomeLine(outcomes[i], this.display.width));
      }
    };
    try {
      await Promise.all(Array.from({ length: Math.min(this.settings.jobs, this.files.length) }, lane));
    } finally {
      await this.pool.close();
    }
    return outcomes;
  }

  private async one(id: number, file: InputFile): Promise<FileOutcome> {
    const label = displayPath(file.path, this.display.cwd);
    const inputBytes = statSync(file.path).size;
    const fail = (code: string, detail: string): FileOutcome => ({ label, inputBytes, error: { code, detail } });
    if (this.controller.signal.aborted) return fail('cli.interrupted', 'not started: the run was interrupted');
    const ext = extname(file.path).slice(1).toLowerCase();
    const entry = compressorForFormat(ext);
    if (!entry) return fail('compress.unsupported_format', unsupportedReason(file.path)!);
    let options: JobOptions;
    try {
      options = optionsFor(entry, this.settings.options, '--options');
    } catch (err) {
      if (err instanceof ApiError) return fail(err.code, err.detail ?? err.message);
      throw err;
    }

    const targetDir = this.settings.outDir ? join(this.settings.outDir, relative(file.base, dirname(file.path))) : dirname(file.path);
    mkdirSync(targetDir, { recursive: true });
    // Beside the target, so publishing the output is one rename on one file system.
    const work = mkdtempSync(join(targetDir, '.compressd-'));
    this.reporter.start(id, label);
    try {
      const outcome = await this.pool.run(
        { jobId: String(id), jobType: entry.jobType, format: ext, options, inputPath: file.path, outDir: work },
        this.controller.signal,
        (percent, phase) => this.reporter.progress(id, percent, phase),
      );
      if (this.controller.signal.aborted) return fail('cli.interrupted', 'stopped: the run was interrupted');
      if (!outcome.ok) return fail(outcome.failure.code, outcome.failure.detail);
      const { output } = outcome;
      const name = outputFileName(basename(file.path, extname(file.path)), output.format);
      // --in-place replaces an input whose format did not change, whatever its extension's spelling.
      const target = this.settings.inPlace && sameFormat(ext, output.format) ? file.path : join(targetDir, name);
      const refusal = this.refuse(file, target);
      if (refusal) return fail('cli.would_overwrite', refusal);
      this.claimed.add(target);
      if (dirname(resolve(output.path)) === work) renameSync(output.path, target);
      else copyFileSync(output.path, target);
      return { label, inputBytes, outputBytes: statSync(target).size, output: displayPath(target, this.display.cwd) };
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }

  /** Why `target` may not be written, if it may not: inputs are sacred unless --in-place replaces this one. */
  private refuse(file: InputFile, target: string): string | null {
    if (this.claimed.has(target)) return `${displayPath(target, this.display.cwd)} is already the output of another input`;
    let real: string | null = null;
    try {
      real = realpathSync(target);
    } catch {
      return null;
    }
    if (this.settings.inPlace && real === realpathSync(file.path)) return null;
    if (this.inputs.has(real)) return `${displayPath(target, this.display.cwd)} is an input; use --in-place to replace inputs`;
    if (this.settings.inPlace) return `${displayPath(target, this.display.cwd)} exists and is not this input`;
    return null;
  }
}
