import { CreateBucketCommand, DeleteObjectCommand, GetObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { startPostgres, type TestPostgres } from './helpers/pg.ts';
import { startSwift, type TestSwift } from './helpers/swift.ts';

// The real servers cluster mode runs on, as the project's scripts install and start them.
describe('test servers for cluster mode', () => {
  let db: TestPostgres;
  let swift: TestSwift;
  before(async () => {
    [db, swift] = await Promise.all([startPostgres(), startSwift()]);
  });
  after(async () => {
    await Promise.all([db?.stop(), swift?.stop()]);
  });

  test('PostgreSQL 15 answers on loopback with trust auth, one database per test', async () => {
    const url = await db.createDatabase('smoke');
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      const { rows } = await client.query<{ v: string; db: string }>('SELECT current_setting($1) AS v, current_database() AS db', ['server_version_num']);
      assert.equal(Math.floor(Number(rows[0]!.v) / 10000), 15);
      assert.equal(rows[0]!.db, 'smoke');
    } finally {
      await client.end();
    }
  });

  test('Swift answers the S3 API with the tempauth user as access key', async () => {
    const s3 = new S3Client({
      endpoint: swift.endpoint,
      region: swift.region,
      credentials: { accessKeyId: swift.accessKeyId, secretAccessKey: swift.secretAccessKey },
      forcePathStyle: true,
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
    await s3.send(new CreateBucketCommand({ Bucket: 'smoke' }));
    await s3.send(new PutObjectCommand({ Bucket: 'smoke', Key: 'a/input', Body: 'hello' }));
    const got = await s3.send(new GetObjectCommand({ Bucket: 'smoke', Key: 'a/input' }));
    assert.equal(await got.Body!.transformToString(), 'hello');
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: 'smoke', Delimiter: '/' }));
    assert.deepEqual(listed.CommonPrefixes?.map((p) => p.Prefix), ['a/']);
    await s3.send(new DeleteObjectCommand({ Bucket: 'smoke', Key: 'a/input' }));
    await assert.rejects(s3.send(new GetObjectCommand({ Bucket: 'smoke', Key: 'a/input' })), { name: 'NoSuchKey' });
    const wrong = new S3Client({ endpoint: swift.endpoint, region: swift.region, forcePathStyle: true, credentials: { accessKeyId: swift.accessKeyId, secretAccessKey: 'wrong' } });
    await assert.rejects(wrong.send(new GetObjectCommand({ Bucket: 'smoke', Key: 'a/input' })), (err: Error) => err.name !== 'NoSuchKey');
  });
});
