import { mkdir, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * Where job files live: `spool/<job>/input` and `spool/<job>/out/`. Behind an interface
 * so shared storage can replace the local disk. Paths come from job ids only, never
 * from client file names.
 */
export interface Spool {
  root: string;
  prepare(id: string): Promise<string>;
  inputPath(id: string): string;
  outputDir(id: string): string;
  remove(id: string): Promise<void>;
  /** Job ids that have files in the spool. */
  ids(): Promise<string[]>;
}

const SAFE_ID = /^[A-Za-z0-9-]+$/;

export class LocalSpool implements Spool {
  constructor(readonly root: string) {}

  private dir(id: string): string {
    if (!SAFE_ID.test(id)) throw new Error(`unsafe job id: ${id}`);
    return join(this.root, id);
  }

  async prepare(id: string): Promise<string> {
    await mkdir(this.dir(id), { recursive: true });
    return this.inputPath(id);
  }

  inputPath(id: string): string {
    return join(this.dir(id), 'input');
  }

  outputDir(id: string): string {
    return join(this.dir(id), 'out');
  }

  async remove(id: string): Promise<void> {
    await rm(this.dir(id), { recursive: true, force: true });
  }

  async ids(): Promise<string[]> {
    await mkdir(this.root, { recursive: true });
    return (await readdir(this.root)).filter((n) => SAFE_ID.test(n));
  }
}
