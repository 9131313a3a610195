/**
 * What time it is, for everything that schedules by time: leases, retention, webhook retries,
 * rate windows and caches. Production reads the system clock; tests pass a clock they move
 * forward instead of waiting.
 */
export type Clock = () => Date;

export const systemClock: Clock = () => new Date();
