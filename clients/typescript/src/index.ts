export { CompressdClient, Job } from './client.ts';
export type { ClientOptions, CompressInput, CompressOptions, WaitOptions, JobAccepted, JobStatus, CostEstimate, Entitlements, Compressors, CompressOptionsObject } from './client.ts';
export { CompressdError, JobFailedError } from './errors.ts';
export type { RetryPolicy } from './http.ts';
export { verifyWebhook, type WebhookEvent } from './webhook.ts';
export type { components, paths, webhooks } from './openapi.ts';
