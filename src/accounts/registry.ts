import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { Journal } from '../durable/journal.ts';
import { ipAllowed, parseAllowList } from './ip-allow.ts';
import { newApiKey, parseApiKey, secretMatches } from './keys.ts';

export const STARTING_CREDITS = 500;

type AccountRecord =
  | { t: 'account'; name: string; grant: number; at: string }
  | { t: 'key'; id: string; account: string; hash: string; guest: boolean; allowIps: string[]; at: string }
  | { t: 'revoke'; id: string; at: string }
  | { t: 'credits'; account: string; amount: number; at: string };

export interface ApiKeyInfo {
  id: string;
  account: string;
  guest: boolean;
  allowIps: string[];
  createdAt: string;
  revoked: boolean;
}

/** Throws unless `name` is a valid account name and `credits` a valid starting grant. */
export function checkNewAccount(name: string, credits: number): void {
  if (!/^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/.test(name)) throw new Error(`invalid account name: ${name}`);
  if (!Number.isInteger(credits) || credits < 0) throw new Error('credits must be a whole number ≥ 0');
}

/** Throws unless `amount` is a valid change of an account's grant. */
export function checkCreditAmount(amount: number): void {
  if (!Number.isInteger(amount) || amount === 0) throw new Error('amount must be a non-zero whole number');
}

/** Who is calling: the account whose credits and jobs a request uses. */
export interface Principal {
  account: string;
  keyId: string;
  guest: boolean;
}

/** Who a request's API key belongs to: the data dir's registry, or the cluster's database. */
export interface Authenticator {
  /** The principal for a key used from `ip`, or null: unknown, revoked and disallowed IP look the same. */
  authenticate(key: string | undefined, ip: string): Principal | null | Promise<Principal | null>;
}

/**
 * Accounts, API keys and credit grants, kept in `accounts.log` in the data dir. The CLI
 * and a running server both append to it; a server picks up the CLI's records by
 * re-reading the journal (`refresh`), so a new key works within about a second.
 */
export class AccountRegistry implements Authenticator {
  private readonly journal: Journal<AccountRecord>;
  private readonly accounts = new Map<string, { granted: number; createdAt: string }>();
  private readonly keys = new Map<string, ApiKeyInfo & { hash: string }>();
  private timer?: NodeJS.Timeout;

  constructor(dataDir: string) {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    this.journal = new Journal<AccountRecord>(join(dataDir, 'accounts.log'));
    this.refresh();
  }

  refresh(): void {
    for (const r of this.journal.readNew().records) this.apply(r);
  }

  private apply(r: AccountRecord): void {
    switch (r.t) {
      case 'account':
        // A second CLI racing to create the same account: the first record wins.
        if (!this.accounts.has(r.name)) this.accounts.set(r.name, { granted: r.grant, createdAt: r.at });
        break;
      case 'key':
        if (!this.keys.has(r.id)) this.keys.set(r.id, { id: r.id, account: r.account, hash: r.hash, guest: r.guest, allowIps: r.allowIps, createdAt: r.at, revoked: false });
        break;
      case 'revoke': {
        const k = this.keys.get(r.id);
        if (k) k.revoked = true;
        break;
      }
      case 'credits': {
        const a = this.accounts.get(r.account);
        if (a) a.granted += r.amount;
        break;
      }
    }
  }

  private write(r: AccountRecord): void {
    this.refresh();
    this.journal.appendSync(r);
    this.refresh();
  }

  /** Re-reads the journal periodically so records written by the CLI take effect. */
  watch(intervalMs = 250): void {
    this.timer = setInterval(() => this.refresh(), intervalMs);
    this.timer.unref();
  }

  close(): void {
    clearInterval(this.timer);
    void this.journal.close();
  }

  hasAccount(name: string): boolean {
    this.refresh();
    return this.accounts.has(name);
  }

  accountNames(): string[] {
    return [...this.accounts.keys()];
  }

  isEmpty(): boolean {
    this.refresh();
    return this.accounts.size === 0 && this.keys.size === 0;
  }

  /** Creates the account with its starting grant unless it exists. Returns true when created. */
  ensureAccount(name: string, credits = STARTING_CREDITS): boolean {
    checkNewAccount(name, credits);
    if (this.hasAccount(name)) return false;
    this.write({ t: 'account', name, grant: credits, at: new Date().toISOString() });
    return true;
  }

  createKey(account: string, opts: { guest?: boolean; allowIps?: string | string[] } = {}): { id: string; key: string } {
    if (!this.hasAccount(account)) throw new Error(`no such account: ${account}`);
    const allowIps = parseAllowList(opts.allowIps ?? []);
    const k = newApiKey();
    this.write({ t: 'key', id: k.id, account, hash: k.hash, guest: opts.guest ?? false, allowIps, at: new Date().toISOString() });
    return { id: k.id, key: k.key };
  }

  revokeKey(idOrKey: string): boolean {
    const id = parseApiKey(idOrKey)?.id ?? idOrKey;
    this.refresh();
    const k = this.keys.get(id);
    if (!k || k.revoked) return false;
    this.write({ t: 'revoke', id, at: new Date().toISOString() });
    return true;
  }

  addCredits(account: string, amount: number): void {
    checkCreditAmount(amount);
    if (!this.hasAccount(account)) throw new Error(`no such account: ${account}`);
    this.write({ t: 'credits', account, amount, at: new Date().toISOString() });
  }

  listKeys(): ApiKeyInfo[] {
    this.refresh();
    return [...this.keys.values()].map(({ hash: _hash, ...info }) => info);
  }

  granted(account: string): number {
    return this.accounts.get(account)?.granted ?? 0;
  }

  /** The principal for a key used from `ip`, or null: unknown, revoked and disallowed IP look the same. */
  authenticate(key: string | undefined, ip: string): Principal | null {
    const parsed = key ? parseApiKey(key.trim()) : null;
    if (!parsed) return null;
    // A key the CLI created a moment ago may not have been picked up by the watcher yet.
    if (!this.keys.has(parsed.id)) this.refresh();
    const k = this.keys.get(parsed.id);
    if (!k || !secretMatches(parsed.secret, k.hash) || k.revoked || !ipAllowed(ip, k.allowIps)) return null;
    return { account: k.account, keyId: k.id, guest: k.guest };
  }
}
