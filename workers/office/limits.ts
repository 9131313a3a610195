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
  /** XML parts larger than this are not parsed for picture sizes (their pictures keep their size). */
  maxScanBytes: 64 * 1024 ** 2,
  /** [Content_Types].xml and .rels parts larger than this make the package damaged. */
  maxPackageXmlBytes: 16 * 1024 ** 2,
} as const;
