import { Hono } from 'hono';
import type { Ledger } from '../../accounts/credits.ts';
import type { Plan } from '../../accounts/plan.ts';
import type { AppEnv } from '../env.ts';

/** `GET /compress/entitlements/me`: the balance and plan limits of the caller's account (shape in docs/api.md). */
export function entitlementRoutes(ledger: Ledger, planOf: (account: string) => Plan) {
  const app = new Hono<AppEnv>();
  app.get('/compress/entitlements/me', async (c) => {
    const { account, guest } = c.get('principal');
    const credits = await ledger.summary(account);
    const plan = planOf(account);
    return c.json({
      account,
      guest,
      balance: credits.available,
      credits,
      limits: {
        maxFileSizeBytes: plan.maxFileSizeBytes,
        maxConcurrentJobs: plan.maxConcurrentJobs,
        maxQueuedJobs: plan.maxQueuedJobs,
        maxBatchFiles: plan.maxBatchFiles,
      },
    });
  });
  return app;
}
