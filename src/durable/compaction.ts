/**
 * When a journal is compacted while the server runs: once it holds more than `ratio` times its live
 * records and more than `minRecords` in all. With the default, a log at rest is at most about twice
 * the size of its live records, or 100 records (a compaction costs what is live, so compacting a
 * small log often costs little).
 */
export interface CompactionSettings {
  ratio: number;
  minRecords: number;
}

export const COMPACTION_DEFAULTS: CompactionSettings = { ratio: 2, minRecords: 100 };
