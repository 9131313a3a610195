import type { Costing } from './types.ts';

export const MB = 1024 * 1024;

export function perMegabyte(baseCost: number, incrementMb: number): Costing {
  return { strategy: 'PerMegabyte', baseCost, increment: incrementMb, incrementUnit: 'mb', displaySuffix: `per ${incrementMb} MB` };
}

/**
 * Credits for an input of `bytes` (null when unknown: the base cost, a minimum).
 * PerMegabyte: max(base, ceil(size / increment)), with 1 MB = 1,048,576 bytes.
 */
export function creditsFor(costing: Costing, bytes: number | null): number {
  if (costing.strategy === 'Fixed' || bytes === null || costing.increment === null) return costing.baseCost;
  return Math.max(costing.baseCost, Math.ceil(bytes / (costing.increment * MB)));
}
