import type { Clock } from '../../src/clock.ts';

/**
 * A clock a test moves forward instead of waiting: the system's time plus an offset that only
 * grows. It never runs behind the system clock, so what is still stamped with the system's time
 * (a delivery queued "now", a database's now()) is never in its future.
 */
export class TestClock {
  private offset = 0;

  readonly now: Clock = () => new Date(Date.now() + this.offset);

  advance(ms: number): void {
    this.offset += ms;
  }

  /** Moves the clock forward to `at` (epoch ms) unless it is already past it. */
  reach(at: number): void {
    this.offset = Math.max(this.offset, at - Date.now());
  }
}

/**
 * A clock that stands still at `at` (epoch ms) until the test moves or sets it: for in-process
 * tests that compare stamped times exactly or start at a fixed date. A running server needs
 * `TestClock`, since the system's own stamps would overtake this one.
 */
export class ManualClock {
  constructor(public at = Date.now()) {}

  readonly now: Clock = () => new Date(this.at);

  advance(ms: number): void {
    this.at += ms;
  }
}
