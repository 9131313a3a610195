export type Category = 'images' | 'documents';

export interface Costing {
  strategy: 'PerMegabyte' | 'Fixed';
  baseCost: number;
  increment: number | null;
  incrementUnit: 'mb' | null;
  displaySuffix: string;
}

export type JsonSchema = Record<string, unknown>;

/** The compressor modules of workers/ (`workers/jpg.ts`, …): workers/compress.ts holds one loader for each. */
export type CompressorModule = 'jpg' | 'png' | 'gif' | 'universal' | 'pdf' | 'office';

export interface CompressorEntry {
  /** Job type, e.g. `image.jpg-compress`. */
  jobType: string;
  category: Category;
  /** Dedicated submission path, e.g. `/compress/png`. */
  path: string;
  /** Dotless input extensions, in the order they are listed. */
  inputFormats: string[];
  /**
   * The formats this compressor stands for in the service's published supported-format list
   * (the one estimate and schema errors give): aliases (jpeg, heif, tif) and specialist formats
   * (TIFF, PSD, RAW) are accepted without being listed there.
   */
  listedFormats: string[];
  /** Dotless formats this compressor may produce for a given input format. */
  outputsFor(inputFormat: string): string[];
  /** Option JSON Schema (draft 2020-12) `properties`; the catalog wraps them. */
  optionProperties: Record<string, JsonSchema>;
  costing: Costing;
  /** The module under workers/ that runs this job type (workers/compress.ts loads it). */
  worker: CompressorModule;
  maxConcurrentJobs: number;
}

/** Options after validation, as workers receive them. */
export interface ResizeOptions {
  enabled?: boolean;
  mode?: 'pixels' | 'percentage';
  preset?: 'off' | '4k' | '2k' | '1080p' | '720p' | 'custom';
  value?: number | null;
}

export interface CompressionOptions {
  enabled?: boolean;
  mode?: 'lossy' | 'lossless';
}

export interface JobOptions {
  _schemaVersion?: number;
  resize?: ResizeOptions;
  compression?: CompressionOptions;
}
