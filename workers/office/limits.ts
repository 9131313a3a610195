/**
 * Caps that make a hostile container fail before anything is inflated. They are checked
 * against the central directory; yauzl then enforces the declared sizes while inflating, so
 * a lying header fails too. The ratio rule is Apache POI's (ZipSecureFile): real OOXML parts
 * stay far below 100:1, deflate bombs sit near its 1032:1 ceiling.
 */
export const LIMITS = {
  /** Entries in one package; real documents have tens to a few thousand. */
  maxEntries: 10_000,
  /** Declared uncompressed bytes of all entries together. */
  maxTotalUncompressed: 1024 ** 3,
  /** Uncompressed:compressed ratio above which an entry is a bomb… */
  maxEntryRatio: 100,
  /** …once it inflates past this many bytes (tiny parts compress well without harm). */
  ratioGraceBytes: 1024 ** 2,
  /** Image parts larger than this stay byte-identical instead of being decoded in memory. */
  maxMediaBytes: 256 * 1024 ** 2,
  /**
   * Pictures of at most this many pixels (32×32: bullets, icons, spacers) are carried over without
   * being decoded: a re-encode saves a few bytes at most, and a package of thousands of them held a
   * worker for minutes (9,990 pictures of 32×32: 195 s, nothing saved).
   */
  maxTinyPixels: 32 * 32,
  /** Pictures recompressed per document, in entry order; the rest are carried over unchanged. */
  maxPictures: 500,
  /**
   * Decoded pixels of the pictures recompressed per document, together (four 100 MP scans, about a
   * minute of work); pictures past it are carried over unchanged, as is one whose peak could never
   * fit the node's memory budget (workers/shared/memory.ts).
   */
  maxDocumentPixels: 400e6,
  /** XML parts larger than this are not parsed for picture sizes (their pictures keep their size). */
  maxScanBytes: 64 * 1024 ** 2,
  /** [Content_Types].xml and .rels parts larger than this make the package damaged. */
  maxPackageXmlBytes: 16 * 1024 ** 2,
} as const;
