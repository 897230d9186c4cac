// A local stand-in for a PyPI simple index (PEP 691 JSON) and its wheel
// files, built in memory, for the catalog's PyPI mirror (src/sources.js).

import { createServer } from 'node:http';
import { createHash } from 'node:crypto';

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(bytes) {
  let c = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) c = CRC_TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

async function deflateRaw(bytes) {
  return new Uint8Array(await new Response(new Blob([bytes]).stream().pipeThrough(new CompressionStream('deflate-raw'))).arrayBuffer());
}

/** A zip archive of `members` ([{ name, bytes, deflate? }]), as a wheel is one. */
export async function zip(members) {
  const enc = new TextEncoder();
  const locals = [];
  const centrals = [];
  let offset = 0;
  for (const m of members) {
    const name = enc.encode(m.name);
    const data = m.deflate ? await deflateRaw(m.bytes) : m.bytes;
    const crc = crc32(m.bytes);
    const local = new Uint8Array(30 + name.length);
    const lv = new DataView(local.buffer);
    lv.setUint32(0, 0x04034b50, true);
    lv.setUint16(4, 20, true);
    lv.setUint16(8, m.deflate ? 8 : 0, true);
    lv.setUint32(14, crc, true);
    lv.setUint32(18, data.length, true);
    lv.setUint32(22, m.bytes.length, true);
    lv.setUint16(26, name.length, true);
    local.set(name, 30);
    const central = new Uint8Array(46 + name.length);
    const cv = new DataView(central.buffer);
    cv.setUint32(0, 0x02014b50, true);
    cv.setUint16(4, 20, true);
    cv.setUint16(6, 20, true);
    cv.setUint16(10, m.deflate ? 8 : 0, true);
    cv.setUint32(16, crc, true);
    cv.setUint32(20, data.length, true);
    cv.setUint32(24, m.bytes.length, true);
    cv.setUint16(28, name.length, true);
    cv.setUint32(42, offset, true);
    central.set(name, 46);
    locals.push(local, data);
    centrals.push(central);
    offset += local.length + data.length;
  }
  const cdSize = centrals.reduce((n, c) => n + c.length, 0);
  const end = new Uint8Array(22);
  const ev = new DataView(end.buffer);
  ev.setUint32(0, 0x06054b50, true);
  ev.setUint16(8, members.length, true);
  ev.setUint16(10, members.length, true);
  ev.setUint32(12, cdSize, true);
  ev.setUint32(16, offset, true);
  return new Uint8Array(Buffer.concat([...locals, ...centrals, end]));
}

/** The wheel of `name==version` holding `bytes` as `member` (plus its METADATA), and its file name. */
export async function wheel(requirement, member, bytes, { deflate = false } = {}) {
  const [name, version] = requirement.split('==');
  const dist = name.toLowerCase().replace(/[-_.]+/g, '_');
  const filename = `${dist}-${version}-py3-none-any.whl`;
  const metadata = new TextEncoder().encode(`Metadata-Version: 2.1\nName: ${name}\nVersion: ${version}\n`);
  const archive = await zip([
    { name: member, bytes, deflate },
    { name: `${dist}-${version}.dist-info/METADATA`, bytes: metadata, deflate: true },
  ]);
  return { project: name.toLowerCase().replace(/[-_.]+/g, '-'), filename, bytes: archive };
}

export const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');

/**
 * Serves `/simple/<project>/` (PEP 691 JSON, each wheel's sha256) and
 * `/files/<wheel>`. A wheel may carry `served` (other bytes than the index
 * hashed: a tampered download) or `endless: true` (streams without end,
 * no Content-Length). Resolves to `{ url, index, requests, close }`.
 */
export async function startIndex(wheels) {
  const requests = [];
  const server = createServer((req, res) => {
    requests.push({ url: req.url, accept: req.headers.accept ?? null });
    const page = /^\/simple\/([^/]+)\/$/.exec(req.url);
    if (page) {
      const files = wheels
        .filter((w) => w.project === page[1])
        .map((w) => ({ filename: w.filename, url: `../../files/${w.filename}`, hashes: { sha256: w.sha256 ?? sha256(w.bytes) } }));
      if (files.length === 0) {
        res.writeHead(404).end('not found');
        return;
      }
      const body = JSON.stringify({ meta: { 'api-version': '1.0' }, name: page[1], files });
      res.writeHead(200, { 'content-type': 'application/vnd.pypi.simple.v1+json' }).end(body);
      return;
    }
    const w = wheels.find((x) => req.url === `/files/${x.filename}`);
    if (!w) {
      res.writeHead(404).end('not found');
      return;
    }
    if (w.endless) {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      const chunk = Buffer.alloc(64 * 1024, 7);
      const pump = () => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once('drain', pump);
      };
      pump();
      return;
    }
    const body = w.served ?? w.bytes;
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(w.announced ?? body.length) });
    res.end(w.announced ? undefined : body);
  });
  const sockets = new Set();
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${server.address().port}`;
  return {
    url,
    index: `${url}/simple`,
    requests,
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(resolve);
      }),
  };
}

/** A URL on 127.0.0.1 where nothing listens (a port just freed). */
export async function deadUrl() {
  const s = createServer();
  await new Promise((resolve) => s.listen(0, '127.0.0.1', resolve));
  const { port } = s.address();
  await new Promise((resolve) => s.close(resolve));
  return `http://127.0.0.1:${port}`;
}
