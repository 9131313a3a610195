/**
 * When a journal is compacted while the server runs: once it holds more than `ratio` times its live
 * records and more than `minRecords` in all. With the default, a log at rest is at most about twice
 * the size of its live records (or a few hundred KB, whichever is more).
 */
export interface CompactionSettings {
  ratio: number;
  minRecords: number;
}

export const COMPACTION_DEFAULTS: CompactionSettings = { ratio: 2, minRecords: 1_000 };
