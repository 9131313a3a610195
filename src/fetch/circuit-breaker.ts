import { LRUCache } from 'lru-cache';

export interface CircuitBreakerOptions {
  failureThreshold: number;
  windowMs: number;
  openMs: number;
  /** Hosts remembered at once; the least recently seen are forgotten first. */
  maxHosts?: number;
  now?: () => number;
}

interface HostState {
  failures: number;
  lastFailureAt: number;
  /** While in the future the host is refused; once past, one probe request is let through. */
  openUntil: number;
  probing: boolean;
}

export type Outcome = 'success' | 'failure' | 'neutral';

/**
 * Per-host circuit breaker: `failureThreshold` consecutive failures, each within `windowMs` of
 * the previous, open the circuit for `openMs`. Then a single probe goes through (half-open):
 * success closes the circuit, failure opens it for another `openMs`.
 */
export class CircuitBreaker {
  private readonly hosts: LRUCache<string, HostState>;
  private readonly now: () => number;

  constructor(private readonly opts: CircuitBreakerOptions) {
    this.hosts = new LRUCache({ max: opts.maxHosts ?? 10_000 });
    this.now = opts.now ?? Date.now;
  }

  /** Milliseconds until `host` may be tried again, or 0 when a request may go now (taking the probe slot if half-open). */
  admit(host: string): number {
    const s = this.hosts.get(host);
    if (!s || s.openUntil === 0) return 0;
    const wait = s.openUntil - this.now();
    if (wait > 0) return wait;
    if (s.probing) return this.opts.openMs;
    s.probing = true;
    return 0;
  }

  record(host: string, outcome: Outcome): void {
    const s = this.hosts.get(host);
    if (outcome === 'success') {
      this.hosts.delete(host);
      return;
    }
    if (outcome === 'neutral') {
      if (s) s.probing = false;
      return;
    }
    const now = this.now();
    const fresh = !s || (!s.probing && now - s.lastFailureAt > this.opts.windowMs);
    const state = fresh ? { failures: 0, lastFailureAt: now, openUntil: 0, probing: false } : s;
    state.failures++;
    state.lastFailureAt = now;
    if (state.probing || state.failures >= this.opts.failureThreshold) state.openUntil = now + this.opts.openMs;
    state.probing = false;
    this.hosts.set(host, state);
  }
}
