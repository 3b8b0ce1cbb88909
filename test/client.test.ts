// src/client.ts against real HTTP servers on 127.0.0.1: a scripted node:http server plays the
// sequences a rollout worker meets (503 + Retry-After, retryable and final 502s, proxies' pages,
// hangs, refused connections); the last test runs against the real app.
import t from 'tap'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { ArbiterClient, ArbiterClientError, createClient, isErrorBody, parseRetryAfter, type RetryEvent } from '../src/client.js'
import { buildTestApp, type TestContext } from './helpers/build-app.js'
import { freePort } from './helpers/ports.js'
import { json, scripted, startUpstream, type ScriptStep, type SeenRequest } from './helpers/upstream.js'

type Step = ScriptStep

interface Scripted {
  url: string
  port: number
  seen: SeenRequest[]
}

async function serve (t: TestContext, steps: Step[]): Promise<Scripted> {
  const seen: SeenRequest[] = []
  const upstream = await startUpstream(t, scripted(steps, seen))
  return { url: upstream.url, port: upstream.port, seen }
}

const manifest = { name: 'arithmetic', version: '1.0.0', verifier: { kind: 'endpoint' as const, ref: 'http://127.0.0.1:9/score' } }
const request = { manifest, task: { prompt: '2+2', reference: '4' }, trajectory: '4' }
const ok = { status: 200, json: { reward: 1, success: true, message: 'ok', output: 'ok', verifier: { kind: 'endpoint', ref: manifest.verifier.ref }, duration_ms: 1.5 } }

function errorBody (statusCode: number, code: string, retryable: boolean, extra: Record<string, unknown> = {}) {
  const names: Record<number, string> = { 400: 'Bad Request', 401: 'Unauthorized', 502: 'Bad Gateway', 503: 'Service Unavailable' }
  return { statusCode, error: names[statusCode] ?? 'Error', code, message: `${code} happened`, retryable, requestId: 'req-1', ...extra }
}
const verifierId = { kind: 'endpoint', ref: manifest.verifier.ref }

function client (url: string, options: Partial<ConstructorParameters<typeof ArbiterClient>[0]> = {}): { client: ArbiterClient, retries: RetryEvent[] } {
  const retries: RetryEvent[] = []
  return {
    client: new ArbiterClient({ baseUrl: url, baseDelayMs: 5, maxDelayMs: 20, onRetry: (event) => retries.push(event), ...options }),
    retries
  }
}

async function rejection (promise: Promise<unknown>): Promise<ArbiterClientError> {
  try {
    await promise
  } catch (error) {
    if (error instanceof ArbiterClientError) return error
    throw error
  }
  throw new Error('expected the call to fail')
}

t.test('verify: a 200 is returned as sent, with the token, request id and JSON body on the wire', async (t) => {
  const server = await serve(t, [ok])
  const { client: arbiter } = client(server.url + '/', { token: 's3cret' })
  const result = await arbiter.verify(request, { requestId: 'rollout-7' })
  t.same(result, ok.json)
  t.equal(server.seen.length, 1)
  const [seen] = server.seen
  t.equal(seen.method, 'POST')
  t.equal(seen.url, '/v1/verify', 'a trailing slash in baseUrl is not doubled')
  t.equal(seen.headers.authorization, 'Bearer s3cret')
  t.match(seen.headers['content-type'], /^application\/json/)
  t.equal(seen.headers['x-request-id'], 'rollout-7')
  t.same(seen.body, request)
})

t.test('503 with Retry-After is waited out, then the 200 is returned', async (t) => {
  const server = await serve(t, [
    { status: 503, json: errorBody(503, 'ARB_OVERLOADED', true), headers: { 'retry-after': '1' } },
    ok
  ])
  const { client: arbiter, retries } = client(server.url)
  const result = await arbiter.verify(request, { requestId: 'same-id' })
  t.equal(result.reward, 1)
  t.equal(server.seen.length, 2)
  t.equal(retries.length, 1)
  t.equal(retries[0].error.code, 'ARB_OVERLOADED')
  t.equal(retries[0].error.retryAfterMs, 1000)
  t.ok(retries[0].delayMs >= 1000 && retries[0].delayMs <= 1100, `the wait honours Retry-After plus at most 10% jitter (${retries[0].delayMs})`)
  t.equal(server.seen[1].headers['x-request-id'], 'same-id', 'the request id is kept across retries')
})

t.test('Retry-After is capped by maxRetryAfterMs; an HTTP date is understood', async (t) => {
  const later = new Date(Date.now() + 3_600_000).toUTCString()
  const server = await serve(t, [
    { status: 503, json: errorBody(503, 'ARB_SHUTTING_DOWN', true), headers: { 'retry-after': '120' } },
    { status: 503, json: errorBody(503, 'ARB_OVERLOADED', true), headers: { 'retry-after': later } },
    ok
  ])
  const { client: arbiter, retries } = client(server.url, { maxRetryAfterMs: 20 })
  t.equal((await arbiter.verify(request)).reward, 1)
  t.equal(retries.length, 2)
  for (const event of retries) t.ok(event.delayMs >= 20 && event.delayMs <= 22, `capped wait (${event.delayMs})`)
  t.ok((retries[1].error.retryAfterMs ?? 0) > 3_000_000, 'the date became a delay of about an hour')
})

t.test('a 502 marked retryable: false is thrown at once, carrying the error body', async (t) => {
  const body = errorBody(502, 'ARB_ENDPOINT_BAD_REWARD', false, { verifier: verifierId, requestId: 'req-42' })
  const server = await serve(t, [{ status: 502, json: body }, ok])
  const { client: arbiter, retries } = client(server.url)
  const error = await rejection(arbiter.verify(request))
  t.equal(server.seen.length, 1, 'not retried')
  t.equal(retries.length, 0)
  t.equal(error.name, 'ArbiterClientError')
  t.equal(error.code, 'ARB_ENDPOINT_BAD_REWARD')
  t.equal(error.status, 502)
  t.equal(error.retryable, false)
  t.same(error.verifier, verifierId)
  t.equal(error.requestId, 'req-42')
  t.same(error.body, body)
  t.equal(error.attempts, 1)
  t.match(error.message, /ARB_ENDPOINT_BAD_REWARD \(endpoint http:\/\/127\.0\.0\.1:9\/score\)/)
})

t.test('a 502 marked retryable: true is retried, and the later 200 returned', async (t) => {
  const server = await serve(t, [
    { status: 502, json: errorBody(502, 'ARB_ENDPOINT_TIMEOUT', true, { verifier: verifierId }) },
    { status: 502, json: errorBody(502, 'ARB_PLUGIN_CRASHED', true, { verifier: verifierId }) },
    ok
  ])
  const { client: arbiter, retries } = client(server.url)
  t.equal((await arbiter.verify(request)).reward, 1)
  t.equal(server.seen.length, 3)
  t.same(retries.map((event) => [event.attempt, event.error.code]), [[1, 'ARB_ENDPOINT_TIMEOUT'], [2, 'ARB_PLUGIN_CRASHED']])
  for (const event of retries) t.ok(event.delayMs >= 0 && event.delayMs <= 20, 'jittered backoff within its bound')
})

t.test('attempts are bounded: a verifier that stays retryable fails after maxAttempts', async (t) => {
  const failing = { status: 502, json: errorBody(502, 'ARB_JUDGE_UNREACHABLE', true) }
  const server = await serve(t, [failing, failing, failing, ok])
  const { client: arbiter, retries } = client(server.url, { maxAttempts: 3 })
  const error = await rejection(arbiter.verify(request))
  t.equal(error.code, 'ARB_JUDGE_UNREACHABLE')
  t.equal(error.retryable, true)
  t.equal(error.attempts, 3)
  t.equal(server.seen.length, 3)
  t.equal(retries.length, 2)
})

t.test('400 and 401 are never retried', async (t) => {
  const server = await serve(t, [
    { status: 400, json: errorBody(400, 'ARB_BAD_REQUEST', false) },
    { status: 401, json: errorBody(401, 'ARB_UNAUTHORIZED', false) }
  ])
  const { client: arbiter } = client(server.url)
  t.equal((await rejection(arbiter.verify(request))).code, 'ARB_BAD_REQUEST')
  t.equal((await rejection(arbiter.verify(request))).code, 'ARB_UNAUTHORIZED')
  t.equal(server.seen.length, 2)
})

t.test('answers that are not Arbiter error bodies: only a 503 with Retry-After is retried', async (t) => {
  const server = await serve(t, [
    { status: 503, text: '<html>upstream draining</html>', headers: { 'retry-after': '0' } },
    ok,
    { status: 503, text: '<html>no healthy upstream</html>' },
    { status: 502, text: '<html>bad gateway</html>', headers: { 'retry-after': '0' } }
  ])
  const { client: arbiter } = client(server.url)
  t.equal((await arbiter.verify(request)).reward, 1, 'a proxy 503 with Retry-After is retried')
  const noRetryAfter = await rejection(arbiter.verify(request))
  t.equal(noRetryAfter.code, 'CLIENT_HTTP_STATUS')
  t.equal(noRetryAfter.status, 503)
  t.equal(noRetryAfter.retryable, false)
  t.match(noRetryAfter.message, /no healthy upstream/)
  const proxy502 = await rejection(arbiter.verify(request))
  t.equal(proxy502.status, 502)
  t.equal(proxy502.retryable, false)
  t.equal(server.seen.length, 4)
})

t.test('a 2xx that is not a result is an error, never a reward of 0', async (t) => {
  const server = await serve(t, [
    { status: 200, json: { reward: null, verifier: verifierId, duration_ms: 1 } },
    { status: 200, text: 'not json' },
    { status: 200, json: { reward: '1', verifier: verifierId, duration_ms: 1 } }
  ])
  const { client: arbiter } = client(server.url)
  for (let i = 0; i < 3; i++) {
    const error = await rejection(arbiter.verify(request))
    t.equal(error.code, 'CLIENT_BAD_RESPONSE')
    t.equal(error.retryable, false)
  }
  t.equal(server.seen.length, 3, 'none retried')
})

t.test('connection refused is retried up to maxAttempts, then thrown', async (t) => {
  const port = await freePort()
  const { client: arbiter, retries } = client(`http://127.0.0.1:${port}`, { maxAttempts: 3 })
  const error = await rejection(arbiter.verify(request))
  t.equal(error.code, 'CLIENT_CONNECTION_FAILED')
  t.equal(error.retryable, true)
  t.equal(error.attempts, 3)
  t.equal(error.status, undefined)
  t.match(error.message, /ECONNREFUSED/)
  t.equal(retries.length, 2)
})

t.test('connection refused, then the server comes up: the retry gets the answer', async (t) => {
  const port = await freePort()
  // Not listening yet: it starts while the client waits before its second attempt.
  const seen: SeenRequest[] = []
  const answer = scripted([ok], seen)
  const server = createServer((request, response) => {
    let body = ''
    request.on('data', (chunk: Buffer) => { body += chunk.toString() })
    request.on('end', () => { void answer(request, response, { method: request.method ?? '', url: request.url ?? '', headers: request.headers, body }) })
  })
  t.teardown(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()) }))
  const retries: RetryEvent[] = []
  const arbiter = new ArbiterClient({
    baseUrl: `http://127.0.0.1:${port}`,
    baseDelayMs: 50,
    maxDelayMs: 50,
    // The server starts listening while the client waits before its second attempt.
    onRetry: (event) => { retries.push(event); if (!server.listening) server.listen(port, '127.0.0.1') }
  })
  const result = await arbiter.verify(request)
  t.equal(result.reward, 1)
  t.equal(retries[0].error.code, 'CLIENT_CONNECTION_FAILED')
  t.equal(seen.length, 1)
})

t.test('a Retry-After beyond the deadline gives up at once with the server\'s error', async (t) => {
  const server = await serve(t, [{ status: 503, json: errorBody(503, 'ARB_OVERLOADED', true), headers: { 'retry-after': '30' } }, ok])
  const { client: arbiter, retries } = client(server.url, { timeoutMs: 2_000 })
  const error = await rejection(arbiter.verify(request))
  t.equal(error.code, 'ARB_OVERLOADED', 'the real reason, not a client timeout')
  t.equal(error.attempts, 1)
  t.equal(retries.length, 0)
  t.equal(server.seen.length, 1)
})

t.test('the per-call deadline ends a call whose server never answers', async (t) => {
  const server = await serve(t, ['hang', 'hang'])
  const { client: arbiter } = client(server.url, { timeoutMs: 60_000 })
  const error = await rejection(arbiter.verify(request, { timeoutMs: 300 }))
  t.equal(error.code, 'CLIENT_TIMEOUT')
  t.equal(server.seen.length, 1, 'a timeout is not retried past the deadline')
})

t.test('the caller\'s signal aborts a call', async (t) => {
  const server = await serve(t, ['hang'])
  const { client: arbiter } = client(server.url)
  const controller = new AbortController()
  const pending = rejection(arbiter.verify(request, { signal: controller.signal }))
  const started = setInterval(() => { if (server.seen.length > 0) { clearInterval(started); controller.abort() } }, 5)
  const error = await pending
  t.equal(error.code, 'CLIENT_ABORTED')
  t.equal(error.retryable, false)
})

t.test('an abort during a backoff wait ends the call at once', async (t) => {
  const server = await serve(t, [{ status: 503, json: errorBody(503, 'ARB_OVERLOADED', true), headers: { 'retry-after': '20' } }, ok])
  const controller = new AbortController()
  const arbiter = createClient({ baseUrl: server.url, onRetry: () => controller.abort() })
  const error = await rejection(arbiter.verify(request, { signal: controller.signal }))
  t.equal(error.code, 'CLIENT_ABORTED')
  t.equal(error.attempts, 1)
  t.equal(server.seen.length, 1)
})

t.test('an answer that breaks off mid-body is thrown, not resent (the verification may have run)', async (t) => {
  const server = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' })
    res.write('{"reward": 1')
    setImmediate(() => res.destroy())
  })
  let requests = 0
  server.on('request', () => { requests++ })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()) }))
  const { client: arbiter } = client(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)
  const error = await rejection(arbiter.verify(request))
  t.equal(error.code, 'CLIENT_CONNECTION_FAILED')
  t.equal(error.status, 200)
  t.equal(error.retryable, false)
  t.equal(requests, 1)
})

t.test('verifyBatch: entries in order; only retryable entries are sent again, alone', async (t) => {
  const r = (reward: number) => ({ reward, success: reward >= 0.6, message: '', output: '', verifier: verifierId, duration_ms: 1 })
  const timeout = errorBody(502, 'ARB_ENDPOINT_TIMEOUT', true, { verifier: verifierId })
  const badReward = errorBody(502, 'ARB_ENDPOINT_BAD_REWARD', false, { verifier: verifierId })
  const server = await serve(t, [
    { status: 200, json: { results: [r(1), timeout, badReward, timeout] } },
    { status: 200, json: { results: [r(0.5), timeout] } },
    { status: 200, json: { results: [r(0)] } }
  ])
  const { client: arbiter, retries } = client(server.url)
  const items = [0, 1, 2, 3].map((i) => ({ task: { prompt: `q${i}` }, trajectory: `a${i}` }))
  const { results, ok, failed } = await arbiter.verifyBatch({ manifest, items })
  t.equal(ok, 3, 'counts cover the merged entries, not the last round')
  t.equal(failed, 1)
  t.equal(server.seen.length, 3)
  t.equal(server.seen[0].url, '/v1/verify/batch')
  t.same(server.seen[0].body, { manifest, items })
  t.same(server.seen[1].body, { manifest, items: [items[1], items[3]] }, 'the second round carries only the retryable items, with the manifest')
  t.same(server.seen[2].body, { manifest, items: [items[3]] })
  t.same(retries.map((event) => event.items), [[1, 3], [3]])
  t.same(results.map((entry) => isErrorBody(entry) ? entry.code : entry.reward), [1, 0.5, 'ARB_ENDPOINT_BAD_REWARD', 0])
})

t.test('verifyBatch: per-item manifests; retryItems: false keeps the first answer; bounded rounds', async (t) => {
  const timeout = errorBody(502, 'ARB_PLUGIN_TIMEOUT', true, { verifier: verifierId })
  const server = await serve(t, [
    { status: 200, json: { results: [timeout] } },
    { status: 200, json: { results: [timeout] } },
    { status: 200, json: { results: [timeout] } }
  ])
  const items = [request]
  const once = client(server.url, { retryItems: false })
  const first = await once.client.verifyBatch({ items })
  t.same(server.seen[0].body, { items })
  t.equal(first.results.length, 1)
  t.ok(isErrorBody(first.results[0]))
  t.equal(once.retries.length, 0)
  const twice = client(server.url, { maxAttempts: 2 })
  const second = await twice.client.verifyBatch({ items })
  t.equal(server.seen.length, 3, 'one round, then two rounds at most')
  t.equal(isErrorBody(second.results[0]) && second.results[0].code, 'ARB_PLUGIN_TIMEOUT', 'still failing: returned as its error body, not thrown')
})

t.test('verifyBatch: a resend that fails as a whole leaves the first answers standing', async (t) => {
  const timeout = errorBody(502, 'ARB_ENDPOINT_TIMEOUT', true, { verifier: verifierId })
  const server = await serve(t, [
    { status: 200, json: { results: [ok.json, timeout] } },
    { status: 503, json: errorBody(503, 'ARB_SHUTTING_DOWN', false) }
  ])
  const { client: arbiter } = client(server.url)
  const { results } = await arbiter.verifyBatch({ items: [request, request] })
  t.equal(server.seen.length, 2)
  t.same(results, [ok.json, timeout])
})

t.test('verifyBatch: the envelope\'s own errors are thrown; a short answer is a bad response', async (t) => {
  const server = await serve(t, [
    { status: 400, json: errorBody(400, 'ARB_BAD_REQUEST', false, { message: 'items: more than 1024 items' }) },
    { status: 200, json: { results: [] } },
    { status: 200, json: { results: [{ reward: null }] } }
  ])
  const { client: arbiter } = client(server.url)
  const tooMany = await rejection(arbiter.verifyBatch({ items: [request] }))
  t.equal(tooMany.code, 'ARB_BAD_REQUEST')
  t.match(tooMany.message, /more than 1024 items/)
  t.equal((await rejection(arbiter.verifyBatch({ items: [request] }))).code, 'CLIENT_BAD_RESPONSE')
  t.equal((await rejection(arbiter.verifyBatch({ items: [request] }))).code, 'CLIENT_BAD_RESPONSE', 'an entry with reward null is neither result nor error')
  t.equal(server.seen.length, 3)
})

t.test('parseRetryAfter and option checks', async (t) => {
  t.equal(parseRetryAfter(null), undefined)
  t.equal(parseRetryAfter('3'), 3000)
  t.equal(parseRetryAfter(' 0 '), 0)
  t.equal(parseRetryAfter('soon'), undefined)
  t.equal(parseRetryAfter(new Date(10_000).toUTCString(), 5_000), 5000)
  t.equal(parseRetryAfter(new Date(0).toUTCString(), 5_000), 0, 'a date in the past means now')
  t.throws(() => new ArbiterClient({ baseUrl: 'arbiter:8080/x y' }), TypeError)
  t.throws(() => new ArbiterClient({ baseUrl: 'http://127.0.0.1', maxAttempts: 0 }), TypeError)
  t.throws(() => new ArbiterClient({ baseUrl: 'http://127.0.0.1', timeoutMs: Number.NaN }), TypeError)
})

t.test('against the real app on 127.0.0.1:0 with an endpoint verifier', async (t) => {
  const scorer = await startUpstream(t, json(200, { reward: 0.25, message: 'partial' }))
  const { app } = await buildTestApp(t)
  const address = await app.listen({ port: 0, host: '127.0.0.1' })
  const retries: RetryEvent[] = []
  const arbiter = new ArbiterClient({ baseUrl: address, baseDelayMs: 5, maxDelayMs: 10, maxAttempts: 2, onRetry: (event) => retries.push(event) })
  const endpoint = { name: 'scorer', version: '1.0.0', verifier: { kind: 'endpoint' as const, ref: `${scorer.url}/score` } }

  const result = await arbiter.verify({ manifest: endpoint, task: { prompt: '2+2', reference: '4' }, trajectory: 'four' }, { requestId: 'client-e2e-1' })
  t.equal(result.reward, 0.25)
  t.equal(result.verifier.kind, 'endpoint')
  t.equal(result.verifier.ref, `${scorer.url}/score`)
  t.equal(typeof result.duration_ms, 'number')
  t.same(JSON.parse(scorer.received[0].body), { task: { prompt: '2+2', reference: '4' }, trajectory: 'four' })

  // The scorer answers without a reward: a 502 the server marks retryable: false, not retried.
  scorer.handle(json(200, { reward: null }))
  const bad = await rejection(arbiter.verify({ manifest: endpoint, task: {}, trajectory: 'x' }, { requestId: 'client-e2e-2' }))
  t.equal(bad.status, 502)
  t.equal(bad.code, 'ARB_ENDPOINT_BAD_REWARD')
  t.equal(bad.retryable, false)
  t.same(bad.verifier, { kind: 'endpoint', ref: `${scorer.url}/score` })
  t.equal(bad.requestId, 'client-e2e-2')
  t.equal(scorer.received.length, 2)
  t.equal(retries.length, 0)

  // A malformed request is the server's 400, naming the field, never retried.
  const malformed = await rejection(arbiter.verify({ manifest: { verifier: { kind: 'nope', ref: 'x' } }, task: {}, trajectory: null } as any))
  t.equal(malformed.status, 400)
  t.equal(malformed.code, 'ARB_BAD_REQUEST')
  t.match(malformed.message, /kind/)
  t.equal(retries.length, 0)
})

t.test('verifyBatch against the real app: one failing item never fails the others', async (t) => {
  const scorer = await startUpstream(t, (_request, response, received) => {
    const { trajectory } = JSON.parse(received.body) as { trajectory: string }
    response.writeHead(200, { 'content-type': 'application/json' })
    response.end(JSON.stringify(trajectory === 'garbled' ? { reward: 'high' } : { reward: trajectory.length / 10 }))
  })
  const { app } = await buildTestApp(t)
  const address = await app.listen({ port: 0, host: '127.0.0.1' })
  const arbiter = new ArbiterClient({ baseUrl: address, maxAttempts: 2, baseDelayMs: 5 })
  const shared = { name: 'scorer', version: '1.0.0', verifier: { kind: 'endpoint' as const, ref: `${scorer.url}/score` } }
  const items = ['four', 'garbled', 'ten'].map((trajectory) => ({ task: { prompt: 'p' }, trajectory }))
  const response = await arbiter.verifyBatch({ manifest: shared, items })
  t.equal(response.results.length, 3)
  t.same(response.results.map((entry) => isErrorBody(entry) ? entry.code : entry.reward), [0.4, 'ARB_ENDPOINT_BAD_REWARD', 0.3])
  t.equal(response.ok, 2)
  t.equal(response.failed, 1)
  const failedEntry = response.results[1]
  t.ok(isErrorBody(failedEntry) && failedEntry.retryable === false && failedEntry.verifier?.kind === 'endpoint', 'the failed entry is a full error body')
  t.equal(scorer.received.length, 3, 'nothing retried: the failure is not retryable')
})
