import type pg from 'pg';
import { systemClock, type Clock } from '../clock.ts';
import { ipAllowed, parseAllowList } from './ip-allow.ts';
import { newApiKey, parseApiKey, secretMatches } from './keys.ts';
import { checkCreditAmount, checkNewAccount, STARTING_CREDITS, type ApiKeyInfo, type Authenticator, type Principal } from './registry.ts';

interface KeyRow {
  id: string;
  account: string;
  hash: string;
  guest: boolean;
  allow_ips: string[];
  created_at: Date;
  revoked_at: Date | null;
}

/** How long a node trusts what it read about a key: a revoke on any node takes effect within this. */
const KEY_CACHE_MS = 1000;

/**
 * Accounts, API keys and credit grants in PostgreSQL (cluster mode): the CLI on any machine
 * and every node share them, so a key created anywhere works everywhere at once.
 */
export class PgAccountRegistry implements Authenticator {
  private readonly cache = new Map<string, { row: KeyRow | undefined; at: number }>();

  constructor(
    private readonly pool: pg.Pool,
    /** What the key cache's age is read by. */
    private readonly clock: Clock = systemClock,
  ) {}

  async isEmpty(): Promise<boolean> {
    const { rows } = await this.pool.query('SELECT 1 FROM accounts LIMIT 1');
    return rows.length === 0;
  }

  async hasAccount(name: string): Promise<boolean> {
    const { rows } = await this.pool.query('SELECT 1 FROM accounts WHERE name = $1', [name]);
    return rows.length > 0;
  }

  /** Creates the account with its starting grant unless it exists. Resolves true when created. */
  async ensureAccount(name: string, credits = STARTING_CREDITS): Promise<boolean> {
    checkNewAccount(name, credits);
    const res = await this.pool.query('INSERT INTO accounts (name, granted) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [name, credits]);
    return res.rowCount === 1;
  }

  async createKey(account: string, opts: { guest?: boolean; allowIps?: string | string[] } = {}): Promise<{ id: string; key: string }> {
    if (!(await this.hasAccount(account))) throw new Error(`no such account: ${account}`);
    const allowIps = parseAllowList(opts.allowIps ?? []);
    const k = newApiKey();
    await this.pool.query('INSERT INTO api_keys (id, account, hash, guest, allow_ips, created_at) VALUES ($1, $2, $3, $4, $5, now())', [k.id, account, k.hash, opts.guest ?? false, allowIps]);
    return { id: k.id, key: k.key };
  }

  async revokeKey(idOrKey: string): Promise<boolean> {
    const id = parseApiKey(idOrKey)?.id ?? idOrKey;
    const res = await this.pool.query('UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL', [id]);
    this.cache.delete(id);
    return res.rowCount === 1;
  }

  async addCredits(account: string, amount: number): Promise<void> {
    checkCreditAmount(amount);
    const res = await this.pool.query('UPDATE accounts SET granted = granted + $2 WHERE name = $1', [account, amount]);
    if (res.rowCount === 0) throw new Error(`no such account: ${account}`);
  }

  async listKeys(): Promise<ApiKeyInfo[]> {
    const { rows } = await this.pool.query<KeyRow>('SELECT * FROM api_keys ORDER BY created_at, id');
    return rows.map((r) => ({ id: r.id, account: r.account, guest: r.guest, allowIps: r.allow_ips, createdAt: r.created_at.toISOString(), revoked: r.revoked_at !== null }));
  }

  async authenticate(key: string | undefined, ip: string): Promise<Principal | null> {
    const parsed = key ? parseApiKey(key.trim()) : null;
    if (!parsed) return null;
    let cached = this.cache.get(parsed.id);
    const now = this.clock().getTime();
    if (!cached || now - cached.at > KEY_CACHE_MS) {
      const { rows } = await this.pool.query<KeyRow>('SELECT * FROM api_keys WHERE id = $1', [parsed.id]);
      cached = { row: rows[0], at: now };
      this.cache.set(parsed.id, cached);
      // Unknown ids are cached too (a flood of made-up keys costs one query per id per second); bounded anyway.
      if (this.cache.size > 10_000) this.cache.delete(this.cache.keys().next().value!);
    }
    const k = cached.row;
    if (!k || !secretMatches(parsed.secret, k.hash) || k.revoked_at || !ipAllowed(ip, k.allow_ips)) return null;
    return { account: k.account, keyId: k.id, guest: k.guest };
  }
}
