import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ApiError } from '../src/errors.ts';
import { AllowList, embeddedIPv4 } from '../src/fetch/address-policy.ts';
import { CircuitBreaker } from '../src/fetch/circuit-breaker.ts';
import { FETCH_DEFAULTS, fetchConfigFromEnv, parseDnsOverrides, parseUrlAllow } from '../src/fetch/config.ts';
import { EgressDeniedError, DnsFailureError, isBlockedAddress, vetDestination } from '../src/fetch/egress.ts';
import { pickFileName } from '../src/fetch/file-name.ts';
import { validateInputUrl } from '../src/fetch/fetch-input.ts';
import { isExpiredPresignedAnswer, signedExpiry } from '../src/fetch/presigned.ts';
import ipaddr from 'ipaddr.js';

describe('isBlockedAddress', () => {
  const blocked = [
    '0.0.0.0', '0.255.1.2', '10.0.0.1', '10.255.255.255', '100.64.0.1', '100.127.255.254', '127.0.0.1', '127.255.0.9',
    '169.254.169.254', '172.16.0.1', '172.31.255.255', '192.0.0.8', '192.0.2.1', '192.168.1.1', '198.18.0.1', '198.19.255.255',
    '198.51.100.7', '203.0.113.9', '224.0.0.1', '239.255.255.250', '240.0.0.1', '255.255.255.255',
    '::', '::1', 'fc00::1', 'fd12:3456::1', 'fe80::1', 'febf::1', 'ff02::1', 'ff0e::1', '2001:db8::1', 'fec0::1', '100::1',
    // IPv4 carried inside IPv6: mapped, compatible, SIIT, NAT64, 6to4, Teredo (client is bit-inverted).
    '::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:10.0.0.1', '::ffff:169.254.169.254', '::127.0.0.1', '::a00:1',
    '::ffff:0:a00:1', '64:ff9b::7f00:1', '64:ff9b::10.0.0.1', '64:ff9b::a9fe:a9fe', '2002:7f00:1::1', '2002:a00:1::', '2002:c0a8:101::5',
    '2001:0:4136:e378:8000:63bf:80ff:fffe', '2001:0:a00:1::1',
    'not-an-ip', '', '1.2.3', '[::1]',
  ];
  const allowed = ['8.8.8.8', '1.1.1.1', '93.184.216.34', '100.63.255.255', '100.128.0.1', '172.32.0.1', '192.169.0.1', '2606:4700:4700::1111',
    '2a00:1450:4001::1', '::ffff:8.8.8.8', '64:ff9b::808:808', '2002:808:808::1', '2001:0:4136:e378:8000:63bf:f7f7:f7f7'];

  for (const ip of blocked) test(`blocks ${ip || '(empty)'}`, () => assert.equal(isBlockedAddress(ip), true));
  for (const ip of allowed) test(`lets ${ip} through`, () => assert.equal(isBlockedAddress(ip), false));

  test('unwraps Teredo server and client', () => {
    const inner = embeddedIPv4(ipaddr.IPv6.parse('2001:0:4136:e378:8000:63bf:3fff:fdd2')).map(String);
    assert.deepEqual(inner, ['65.54.227.120', '192.0.2.45']);
  });
});

describe('legacy IPv4 spellings are normalised by the URL parser before the guard sees them', () => {
  for (const [spelling, canonical] of [
    ['2130706433', '127.0.0.1'], ['0x7f000001', '127.0.0.1'], ['0177.0.0.1', '127.0.0.1'], ['0x7f.1', '127.0.0.1'],
    ['127.1', '127.0.0.1'], ['10.1', '10.0.0.1'], ['0xa9.0xfe.0xa9.0xfe', '169.254.169.254'], ['3232235777', '192.168.1.1'],
    ['0', '0.0.0.0'], ['[::ffff:127.0.0.1]', '[::ffff:7f00:1]'],
  ] as const) {
    test(`${spelling} → ${canonical}`, () => {
      const url = validateInputUrl(`https://${spelling}/x.jpg`);
      assert.equal(url.hostname, canonical);
      assert.equal(isBlockedAddress(url.hostname), true);
    });
  }
});

describe('validateInputUrl', () => {
  const code = (raw: unknown) => {
    try {
      validateInputUrl(raw);
      return 'ok';
    } catch (e) {
      assert.ok(e instanceof ApiError);
      assert.equal(e.status, 400);
      assert.equal(e.extra.isRetryable, false);
      return e.code;
    }
  };
  test('malformed or missing', () => {
    for (const raw of [undefined, null, 42, '', '   ', 'not a url', 'https://', '//files.test/a.jpg', `https://a.test/${'x'.repeat(9000)}`]) {
      assert.equal(code(raw), 'url_fetch.invalid_url', String(raw));
    }
  });
  test('not https', () => {
    for (const raw of ['http://files.test/a.jpg', 'ftp://files.test/a.jpg', 'file:///etc/passwd', 'data:text/plain,hi', 'gopher://x/']) {
      assert.equal(code(raw), 'url_fetch.invalid_scheme', raw);
    }
  });
  test('credentials are refused', () => assert.equal(code('https://user:pw@files.test/a.jpg'), 'url_fetch.invalid_url'));
  test('a good URL passes', () => assert.equal(code('https://files.test:8443/a%20b.jpg?X-Amz-Signature=abc'), 'ok'));
});

describe('operator settings', () => {
  test('COMPRESSD_URL_ALLOW takes hosts, suffixes, IPs and CIDRs', () => {
    assert.deepEqual(parseUrlAllow(' minio.internal, .corp.example  10.0.0.0/8,fd00::/8 127.0.0.1 *.s3.lan'), [
      'minio.internal', '.corp.example', '10.0.0.0/8', 'fd00::/8', '127.0.0.1', '*.s3.lan',
    ]);
    assert.deepEqual(parseUrlAllow(''), []);
    assert.throws(() => parseUrlAllow('10.0.0.0/33'), /CIDR/);
    assert.throws(() => parseUrlAllow('bad host!'), /neither/);
  });
  test('COMPRESSD_DNS_OVERRIDES takes host=ip pairs', () => {
    assert.deepEqual(parseDnsOverrides('files.test=127.0.0.1, V6.test=[::1]'), { 'files.test': '127.0.0.1', 'v6.test': '::1' });
    assert.throws(() => parseDnsOverrides('files.test'), /host=ip/);
    assert.throws(() => parseDnsOverrides('files.test=nowhere'), /not an IP/);
  });
  test('fetchConfigFromEnv reads both variables and keeps the defaults', () => {
    const c = fetchConfigFromEnv({ COMPRESSD_URL_ALLOW: 'files.test', COMPRESSD_DNS_OVERRIDES: 'files.test=127.0.0.1' });
    assert.deepEqual(c.urlAllow, ['files.test']);
    assert.deepEqual(c.dnsOverrides, { 'files.test': '127.0.0.1' });
    assert.equal(c.maxRedirects, FETCH_DEFAULTS.maxRedirects);
  });
  test('AllowList matches names, suffixes and CIDRs (through embedded IPv4 too)', () => {
    const allow = new AllowList(['minio.internal', '.corp.example', '10.0.0.0/8', 'fd00::/8']);
    assert.equal(allow.allowsHost('MINIO.internal.'), true);
    assert.equal(allow.allowsHost('evil-minio.internal'), false);
    assert.equal(allow.allowsHost('a.b.corp.example'), true);
    assert.equal(allow.allowsHost('corp.example.evil'), false);
    assert.equal(allow.allowsAddress('10.9.8.7'), true);
    assert.equal(allow.allowsAddress('::ffff:10.9.8.7'), true);
    assert.equal(allow.allowsAddress('fd00::5'), true);
    assert.equal(allow.allowsAddress('192.168.0.1'), false);
  });
});

describe('vetDestination (no network: addresses come from overrides and an in-process resolver)', () => {
  const table: Record<string, string[]> = {
    'public.test': ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946'],
    'mixed.test': ['93.184.216.34', '10.0.0.5'],
    'mixed6.test': ['2606:2800:220:1:248:1893:25c8:1946', '::ffff:192.168.0.1'],
  };
  const config = {
    ...FETCH_DEFAULTS,
    urlAllow: ['minio.lan', '10.20.0.0/16'],
    dnsOverrides: { 'minio.lan': '10.1.1.1', 'store.lan': '10.20.3.4', 'meta.test': '169.254.169.254' },
    resolve: async (h: string) => {
      const hit = table[h];
      if (!hit) throw Object.assign(new Error('nx'), { code: h.startsWith('flaky') ? 'EAI_AGAIN' : 'ENOTFOUND' });
      return hit;
    },
  };
  test('a public name resolves to its first address', async () => assert.equal(await vetDestination('public.test', config), '93.184.216.34'));
  test('one private address among public ones is enough to refuse', async () => {
    await assert.rejects(vetDestination('mixed.test', config), (e) => e instanceof EgressDeniedError && e.address === '10.0.0.5');
    await assert.rejects(vetDestination('mixed6.test', config), EgressDeniedError);
  });
  test('overrides are vetted like DNS answers', async () => {
    await assert.rejects(vetDestination('meta.test', config), EgressDeniedError);
  });
  test('allowed by host name or by CIDR', async () => {
    assert.equal(await vetDestination('minio.lan', config), '10.1.1.1');
    assert.equal(await vetDestination('store.lan', config), '10.20.3.4');
    assert.equal(await vetDestination('10.20.9.9', config), '10.20.9.9');
    await assert.rejects(vetDestination('10.21.0.1', config), EgressDeniedError);
  });
  test('a host-name exemption does not cover the bare IP', async () => {
    await assert.rejects(vetDestination('10.1.1.1', config), EgressDeniedError);
  });
  test('IP literals, bracketed IPv6 included, are checked without DNS', async () => {
    await assert.rejects(vetDestination('[::1]', config), EgressDeniedError);
    assert.equal(await vetDestination('[2606:4700::1111]', config), '2606:4700::1111');
  });
  test('DNS failures say whether they are transient', async () => {
    await assert.rejects(vetDestination('nx.test', config), (e) => e instanceof DnsFailureError && !e.transient);
    await assert.rejects(vetDestination('flaky.test', config), (e) => e instanceof DnsFailureError && e.transient);
  });
});

describe('file name', () => {
  const u = (s: string) => [new URL(s)];
  test('Content-Disposition wins, RFC 8187 included', () => {
    assert.equal(pickFileName('attachment; filename="a.jpg"; filename*=UTF-8\'\'%E2%82%AC%20rates.jpg', u('https://h/x/y.bin'), 'jpg'), '€ rates.jpg');
    assert.equal(pickFileName('inline; filename="../../etc/passwd"', u('https://h/'), 'pdf'), 'passwd.pdf');
  });
  test('URL path, percent-decoded', () => assert.equal(pickFileName(undefined, u('https://h/dir/my%20photo.JPG?sig=1'), 'jpg'), 'my photo.jpg'));
  test('the extension follows sourceFormat', () => {
    assert.equal(pickFileName(undefined, u('https://h/o/abc123'), 'png'), 'abc123.png');
    assert.equal(pickFileName(undefined, u('https://h/o/photo.jpeg'), 'jpg'), 'photo.jpg');
    assert.equal(pickFileName(undefined, u('https://h/o/download.php'), 'pdf'), 'download.pdf');
  });
  test('a broken header falls back to the path', () => assert.equal(pickFileName('attachment; filename=', u('https://h/a.gif'), 'gif'), 'a.gif'));
  test('later URLs of a redirect chain come first', () => {
    assert.equal(pickFileName(undefined, [new URL('https://h/final/real.pdf'), new URL('https://h/')], 'pdf'), 'real.pdf');
  });
  test('none when neither names a file', () => {
    assert.equal(pickFileName(undefined, u('https://h/'), 'jpg'), undefined);
    assert.equal(pickFileName(undefined, u('https://h/dir/'), 'jpg'), undefined);
    assert.equal(pickFileName('attachment', u('https://h/..'), 'jpg'), undefined);
  });
});

describe('presigned-URL expiry', () => {
  const now = Date.UTC(2025, 0, 1);
  test('signature parameters', () => {
    assert.equal(signedExpiry(new URLSearchParams('X-Amz-Date=20240101T000000Z&X-Amz-Expires=3600')), Date.UTC(2024, 0, 1, 1));
    assert.equal(signedExpiry(new URLSearchParams('x-goog-date=20240101T000000Z&x-goog-expires=60')), Date.UTC(2024, 0, 1, 0, 1));
    assert.equal(signedExpiry(new URLSearchParams('Expires=1700000000&Signature=x')), 1_700_000_000_000);
    assert.equal(signedExpiry(new URLSearchParams('sv=2022-11-02&se=2024-01-01T00%3A00%3A00Z&sig=abc')), Date.UTC(2024, 0, 1));
    assert.equal(signedExpiry(new URLSearchParams('se=2024-01-01')), undefined);
    assert.equal(signedExpiry(new URLSearchParams('a=1')), undefined);
  });
  test('store answers', () => {
    const plain = new URL('https://h/a.jpg');
    const s3 = '<?xml version="1.0"?><Error><Code>AccessDenied</Code><Message>Request has expired</Message><Expires>2024-01-01T00:00:00Z</Expires></Error>';
    const gcs = "<?xml version='1.0' encoding='UTF-8'?><Error><Code>ExpiredToken</Code><Message>The provided token has expired.</Message></Error>";
    const azure = '<Error><Code>AuthenticationFailed</Code><Message>Server failed to authenticate the request.</Message><AuthenticationErrorDetail>Signature not valid in the specified time frame: Start [..] - Expiry [..] - Current [..]</AuthenticationErrorDetail></Error>';
    assert.equal(isExpiredPresignedAnswer(403, s3, plain, now), true);
    assert.equal(isExpiredPresignedAnswer(400, gcs, plain, now), true);
    assert.equal(isExpiredPresignedAnswer(403, azure, plain, now), true);
    assert.equal(isExpiredPresignedAnswer(403, '<Error><Code>AccessDenied</Code></Error>', plain, now), false);
    assert.equal(isExpiredPresignedAnswer(403, '', new URL('https://h/a.jpg?X-Amz-Date=20240101T000000Z&X-Amz-Expires=60'), now), true);
    assert.equal(isExpiredPresignedAnswer(403, '', new URL('https://h/a.jpg?X-Amz-Date=20250101T000000Z&X-Amz-Expires=60'), now), false);
    assert.equal(isExpiredPresignedAnswer(500, s3, plain, now), false);
  });
});

describe('circuit breaker', () => {
  test('opens after N consecutive failures, probes once after the block, closes on success', () => {
    let t = 0;
    const b = new CircuitBreaker({ failureThreshold: 3, windowMs: 1000, openMs: 5000, now: () => t });
    for (let i = 0; i < 2; i++) {
      assert.equal(b.admit('h'), 0);
      b.record('h', 'failure');
    }
    assert.equal(b.admit('h'), 0);
    b.record('h', 'failure');
    assert.equal(b.admit('h'), 5000);
    assert.equal(b.admit('other'), 0);
    t = 5000;
    assert.equal(b.admit('h'), 0, 'the probe');
    assert.ok(b.admit('h') > 0, 'only one probe at a time');
    b.record('h', 'failure');
    assert.equal(b.admit('h'), 5000, 'a failed probe re-opens');
    t = 10_000;
    assert.equal(b.admit('h'), 0);
    b.record('h', 'success');
    assert.equal(b.admit('h'), 0);
    assert.equal(b.admit('h'), 0);
  });
  test('failures spread wider than the window do not add up; a success resets', () => {
    let t = 0;
    const b = new CircuitBreaker({ failureThreshold: 2, windowMs: 1000, openMs: 5000, now: () => t });
    b.record('h', 'failure');
    t = 2000;
    b.record('h', 'failure');
    assert.equal(b.admit('h'), 0);
    b.record('h', 'success');
    b.record('h', 'failure');
    assert.equal(b.admit('h'), 0);
    b.record('h', 'failure');
    assert.ok(b.admit('h') > 0);
  });
});
