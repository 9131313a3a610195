const t0 = performance.now();
for (const m of ['../src/config.ts', '../src/cli/command.ts', '../src/accounts/registry.ts', '../src/accounts/pg-registry.ts', '../src/jobs/cluster/database.ts', '../src/cli/compress.ts', '../src/cli/backup.ts', '../src/cli/restore.ts', '../src/service.ts']) {
  const t = performance.now();
  await import(m);
  console.log(m, Math.round(performance.now() - t), 'ms');
}
console.log('total', Math.round(performance.now() - t0));
