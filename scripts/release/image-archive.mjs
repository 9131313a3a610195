// The image archive, made the same at every build of a commit. `docker save` dates what the build
// touched (files a RUN step changed, the directory a COPY wrote into, every history entry and the
// image's creation) by the clock; this rewrites the saved image with every time at or before
// SOURCE_DATE_EPOCH: each layer's entries re-dated (clamped, so older files keep their dates), the
// config's times set to it, the layer and config digests recomputed, and the archive packed in name
// order with fixed owners, modes and dates. `docker load` reads it as it reads `docker save`'s.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import tar from 'tar-stream';

export class ImageArchiveError extends Error {}

/** GNU tar flags that make an archive depend only on its files' names, contents and modes. */
export const tarFlags = (epoch) => ['--sort=name', '--owner=0', '--group=0', '--numeric-owner', `--mtime=@${epoch}`, '--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime'];

/** Copies a layer tar with every entry's time clamped to `epoch`; its sha256 (the layer's diff ID). */
async function redateLayer(from, to, epoch) {
  const limit = new Date(epoch * 1000);
  const extract = tar.extract();
  const pack = tar.pack();
  const hash = createHash('sha256');
  extract.on('entry', (header, stream, next) => {
    if (header.mtime > limit) header.mtime = limit;
    // A PAX record would win over the header's date.
    if (header.pax) for (const key of ['mtime', 'atime', 'ctime']) delete header.pax[key];
    stream.pipe(pack.entry(header, next));
  });
  extract.on('finish', () => pack.finalize());
  pack.on('data', (d) => hash.update(d));
  await Promise.all([pipeline(createReadStream(from), extract), pipeline(pack, createWriteStream(to))]);
  return hash.digest('hex');
}

/**
 * @param saved the file `docker save` wrote (one image)
 * @param out the archive to write
 * @param epoch SOURCE_DATE_EPOCH, in seconds
 * @param tag the image's name:tag
 * @param scratch a directory for the work
 */
export async function reproducibleImage({ saved, out, epoch, tag, scratch }) {
  const work = mkdtempSync(join(scratch, 'image-'));
  try {
    const from = join(work, 'saved');
    const to = join(work, 'archive');
    mkdirSync(from);
    mkdirSync(to);
    const unpacked = spawnSync('tar', ['-xf', saved, '-C', from], { encoding: 'utf8' });
    if (unpacked.status !== 0) throw new ImageArchiveError(`tar could not unpack ${saved}: ${unpacked.stderr}`);
    const manifest = JSON.parse(readFileSync(join(from, 'manifest.json'), 'utf8'));
    if (manifest.length !== 1) throw new ImageArchiveError(`${saved} holds ${manifest.length} images, not one`);
    const layers = [];
    for (const layer of manifest[0].Layers) {
      const tmp = join(to, 'layer.tmp');
      const diffId = await redateLayer(join(from, layer), tmp, epoch);
      mkdirSync(join(to, diffId), { recursive: true });
      renameSync(tmp, join(to, diffId, 'layer.tar'));
      layers.push(`${diffId}/layer.tar`);
    }
    const config = JSON.parse(readFileSync(join(from, manifest[0].Config), 'utf8'));
    const created = new Date(epoch * 1000).toISOString();
    config.created = created;
    for (const entry of config.history ?? []) entry.created = created;
    config.rootfs.diff_ids = layers.map((l) => `sha256:${l.slice(0, 64)}`);
    const configText = JSON.stringify(config);
    const configName = `${createHash('sha256').update(configText).digest('hex')}.json`;
    writeFileSync(join(to, configName), configText);
    writeFileSync(join(to, 'manifest.json'), JSON.stringify([{ Config: configName, RepoTags: [tag], Layers: layers }]));
    const packed = spawnSync('tar', [...tarFlags(epoch), '--mode=u=rw,go=r,a+X', '-C', to, '-cf', out, ...[...new Set(['manifest.json', configName, ...layers.map((l) => l.slice(0, 64))])].sort()], { encoding: 'utf8' });
    if (packed.status !== 0) throw new ImageArchiveError(`tar could not pack the image archive: ${packed.stderr}`);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
