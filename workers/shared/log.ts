import { createLogger } from '../../src/log.ts';

/** The workers' decisions worth an operator's eye, as JSON lines in the service's log format. */
export const workerLog = createLogger();
