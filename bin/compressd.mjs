#!/usr/bin/env node
// `compressd` from a source checkout (`npx .`, `npm link`, `npm start`): TypeScript is loaded in
// this very process, not in a child, so signals reach the server and its exit status is ours.
import { register } from 'tsx/esm/api';

register();
await import('../src/main.ts');
