// The pool's thread entry when running from source: TypeScript loading is registered in
// each worker thread itself, since loader hooks are not inherited by worker threads here.
import { register } from 'tsx/esm/api';

register();
const { default: run } = await import('./compress.ts');
export default run;
