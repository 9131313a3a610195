import { parseArgs } from 'node:util';
import { helpEntry, wrapWords } from '../config.ts';

/** One option of a command: what the parser takes and what its help says come from this one record. */
export interface CliOption {
  type: 'string' | 'boolean';
  /** What the value looks like in the help: `NAME`, `DIR`. */
  arg?: string;
  help: string;
  /** Read when the flag is not given. */
  env?: string;
  /** Taken when neither the flag nor `env` gives a value. */
  default?: string;
  /** The default as the help shows it, where the command works it out itself (the number of CPUs). */
  shownDefault?: string;
}

export interface Command<O extends Record<string, CliOption> = Record<string, CliOption>> {
  /** As typed after `compressd`: `keys create`. */
  name: string;
  /** What follows the name in the usage; lines after the first are continued under it. */
  synopsis: string[];
  /** One paragraph, wrapped to the terminal's 80 columns. */
  about: string;
  options: O;
  allowPositionals?: boolean;
  /** Printed after the options, wrapped like `about`. */
  notes?: string;
}

/** Subcommands under one word (`keys`, `credits`). */
export interface CommandGroup {
  name: string;
  about: string;
  commands: Command[];
}

type Values<O extends Record<string, CliOption>> = { [K in keyof O]?: O[K]['type'] extends 'boolean' ? boolean : string };

/** A mistake in the command line: exit status 2, with the command's help. */
export class UsageError extends Error {}

export function usageLines(cmd: { name: string; synopsis: string[] }): string {
  const [first, ...more] = cmd.synopsis;
  return [`compressd ${cmd.name}${first ? ` ${first}` : ''}`, ...more.map((l) => `    ${l}`)].join('\n');
}

function optionEntry(flag: string, o: CliOption): string {
  const dflt = o.shownDefault ?? o.default;
  return helpEntry(`--${flag}${o.arg ? ` ${o.arg}` : ''}`, o.env, dflt === undefined ? o.help : `${o.help} (default: ${dflt})`);
}

export function commandHelp(cmd: Command): string {
  const options = Object.entries(cmd.options).map(([flag, o]) => optionEntry(flag, o));
  const twins = Object.values(cmd.options).some((o) => o.env);
  const usage = usageLines(cmd).split('\n');
  return [
    `Usage: ${usage[0]}`,
    ...usage.slice(1).map((l) => `       ${l}`),
    '',
    wrapWords(cmd.about, ''),
    '',
    twins ? 'Options (a flag wins over its environment variable):' : 'Options:',
    ...options,
    helpEntry('-h, --help', undefined, 'show this help and exit'),
    ...(cmd.notes ? ['', wrapWords(cmd.notes, '')] : []),
    '',
  ].join('\n');
}

export function groupHelp(group: CommandGroup): string {
  return [`Usage: compressd ${group.name} COMMAND [options]`, '', group.about, '', 'Commands:', ...group.commands.map((c) => indent(usageLines(c))), '', `\`compressd ${group.name} COMMAND --help\` shows a command's options.`, ''].join('\n');
}

const indent = (text: string) => text.replace(/^/gm, '  ');

/**
 * Parses a command's arguments against its options; a flag absent from the command line is read from
 * its environment twin, then its default. Null when `--help` (`-h`) was asked: the caller prints the help.
 */
export function parseCommand<O extends Record<string, CliOption>>(cmd: Command<O>, args: string[], env: NodeJS.ProcessEnv = process.env): { values: Values<O>; positionals: string[] } | null {
  const options = Object.fromEntries(Object.entries(cmd.options).map(([flag, o]) => [flag, { type: o.type }]));
  let parsed;
  try {
    parsed = parseArgs({ args, options: { ...options, help: { type: 'boolean', short: 'h' } }, allowPositionals: cmd.allowPositionals ?? false, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (parsed.values.help) return null;
  const values: Record<string, string | boolean | undefined> = { ...parsed.values };
  delete values.help;
  for (const [flag, o] of Object.entries(cmd.options)) {
    if (values[flag] !== undefined) continue;
    const fromEnv = o.env ? env[o.env] : undefined;
    values[flag] = fromEnv !== undefined && fromEnv !== '' ? fromEnv : o.default;
  }
  return { values: values as Values<O>, positionals: parsed.positionals };
}
