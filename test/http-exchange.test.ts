// exchange(): one POST and its whole answer, against real servers on 127.0.0.1.
import t from 'tap'
import { Pool } from 'undici'
import { exchange, type ExchangeRequest } from '../src/http-exchange.js'
import { startUpstream } from './helpers/upstream.js'

function request (signal: AbortSignal, extra: Partial<ExchangeRequest> = {}): ExchangeRequest {
  return { path: '/score', headers: { 'content-type': 'application/json' }, body: Buffer.from('{"a":1}'), signal, maxBytes: 1024, errorPeekBytes: 64, ...extra }
}

t.test('a 2xx answer comes back whole, with its status and headers; the body was sent', async (t) => {
  const upstream = await startUpstream(t, (_request, response) => {
    response.writeHead(201, { 'content-type': 'application/json', 'retry-after': '3' })
    response.end('{"reward":0.5}')
  })
  const pool = new Pool(upstream.url)
  t.teardown(async () => { await pool.close() })
  const answer = await exchange(pool, request(new AbortController().signal))
  t.equal(answer.status, 201)
  t.equal(answer.headers['retry-after'], '3')
  t.equal(answer.body.toString(), '{"reward":0.5}')
  t.equal(upstream.received[0].body, '{"a":1}')
  t.equal(upstream.received[0].method, 'POST')
})

t.test('a 2xx answer declaring a length over maxBytes is refused before its body is read', async (t) => {
  const upstream = await startUpstream(t, (_request, response) => {
    response.writeHead(200, { 'content-length': '5000' })
    response.write('x'.repeat(100)) // the rest never comes: only the declared length can refuse it
  })
  const pool = new Pool(upstream.url)
  t.teardown(async () => { await pool.destroy() })
  const error = await exchange(pool, request(new AbortController().signal)).catch((caught: unknown) => caught) as { code?: string, message?: string }
  t.equal(error.code, 'UND_ERR_RES_EXCEEDED_MAX_SIZE')
  t.match(error.message, /5000 is over 1024 bytes/)
})

t.test('an error page is read only as far as errorPeekBytes, however large it is', async (t) => {
  const page = 'e'.repeat(64 * 1024)
  const upstream = await startUpstream(t, (_request, response) => {
    response.writeHead(503, { 'content-type': 'text/html' })
    response.write(page.slice(0, 1024))
    setTimeout(() => { response.end(page.slice(1024)) }, 20_000).unref() // never needed
  })
  const pool = new Pool(upstream.url)
  t.teardown(async () => { await pool.destroy() })
  const answer = await exchange(pool, request(new AbortController().signal))
  t.equal(answer.status, 503)
  t.ok(answer.body.length >= 64 && answer.body.length <= 1024, `kept ${answer.body.length} bytes`)
  t.equal(answer.body.toString(), page.slice(0, answer.body.length))
})

t.test('an abort settles at once, also while the request still waits for a connection', async (t) => {
  const upstream = await startUpstream(t, () => { /* never answers */ })
  const pool = new Pool(upstream.url, { connections: 1 })
  t.teardown(async () => { await pool.destroy() })
  const first = new AbortController()
  const busy = exchange(pool, request(first.signal)).catch((caught: unknown) => caught)
  while (upstream.received.length === 0) await new Promise((resolve) => setTimeout(resolve, 5))
  const queued = new AbortController()
  const waiting = exchange(pool, request(queued.signal)).catch((caught: unknown) => caught)
  const reason = new Error('deadline')
  queued.abort(reason)
  t.equal(await waiting, reason, 'the queued exchange rejects with the signal reason')
  first.abort(reason)
  t.equal(await busy, reason, 'the exchange in progress rejects with the signal reason')
  const already = AbortSignal.abort(reason)
  await t.rejects(exchange(pool, request(already)), reason, 'an aborted signal never dispatches')
})

t.test('a chunked body over the dispatcher cap fails while it streams in', async (t) => {
  const upstream = await startUpstream(t, (_request, response) => {
    response.writeHead(200)
    response.end('y'.repeat(4096))
  })
  const pool = new Pool(upstream.url, { maxResponseSize: 1024 })
  t.teardown(async () => { await pool.destroy() })
  const error = await exchange(pool, request(new AbortController().signal, { maxBytes: 1024 })).catch((caught: unknown) => caught) as { code?: string }
  t.equal(error.code, 'UND_ERR_RES_EXCEEDED_MAX_SIZE')
})
