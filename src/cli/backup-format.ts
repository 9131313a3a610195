// What a backup archive holds and may hold: `backup` writes it, `restore` reads and checks it.
import { FORMAT_FILE } from '../durable/data-format.ts';

/** The data dir's journals, append-only between the compactions that replace them whole. */
export const JOURNALS = ['accounts.log', 'ledger.log', 'jobs.log', 'webhooks/outbox.jsonl'] as const;
export const TOKEN_KEY = 'download-token.key';
/** The archive's first entry. */
export const MANIFEST = 'compressd-backup.json';
/** Files a job may own in the spool: its blobs, and the output layout of releases before fixed blob names. */
const BLOB = /^spool\/([A-Za-z0-9-]+)\/(input|output|out\/[^/]+)$/;

export interface BackupManifest {
  compressd: string;
  dataFormat: number;
  /** When the journals were cut. */
  at: string;
  /** Bytes of each journal up to the cut. */
  journals: Record<string, number>;
  jobs: number;
  blobs: number;
  /** Blobs a job at the cut named that were gone before they could be kept (deleted by retention just then). */
  missing: string[];
  /**
   * Every other entry of the archive, with its length and SHA-256: restore refuses an entry that differs.
   * Absent from the backups of the development builds of 0.2.0 before backups recorded them (see `restore`).
   */
  files?: Record<string, { bytes: number; sha256: string }>;
}

export const isBlob = (name: string) => BLOB.test(name) && !name.includes('..');

/** Names a backup may hold; anything else (or a path escaping the data dir) is refused. */
export function allowed(name: string): boolean {
  return name === MANIFEST || name === TOKEN_KEY || name === FORMAT_FILE || (JOURNALS as readonly string[]).includes(name) || isBlob(name);
}
