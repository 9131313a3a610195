// `npm start` serves, also with serve's flags (`npm start -- --port 9000`); `npm start -- COMMAND …`
// runs that command (`npm start -- keys list`, `npm start -- --version`).
const first = process.argv[2];
if (first === undefined || (first.startsWith('-') && !['--version', '-v', '--help', '-h'].includes(first))) process.argv.splice(2, 0, 'serve');
await import('../bin/compressd.mjs');
