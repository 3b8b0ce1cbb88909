// The endpoint kind end to end: Arbiter's /v1/verify against real scoring servers on
// 127.0.0.1 that each test scripts. Every failure must be a 502 with its own code, never a 0.
import t from 'tap'
import type { LookupAddress } from 'node:dns'
import { createServer, type Server } from 'node:net'
import { buildTestApp, verifyBody } from '../../helpers/build-app.js'
import { freePort } from '../../helpers/ports.js'
import { json, startUpstream } from '../../helpers/upstream.js'
import type { LookupFunction } from '../../../src/kinds/endpoint/egress.js'
import { VERSION } from '../../../src/version.js'

async function verify (app: Awaited<ReturnType<typeof buildTestApp>>['app'], body: unknown, headers: Record<string, string> = {}) {
  const response = await app.inject({ method: 'POST', url: '/v1/verify', payload: body as object, headers })
  return { status: response.statusCode, body: response.json(), headers: response.headers }
}

/** A lookup that answers from a table, like a DNS server the test controls. */
function fakeDns (table: Record<string, string | NodeJS.ErrnoException | Array<string | NodeJS.ErrnoException>>): LookupFunction & { calls: string[] } {
  const calls: string[] = []
  const lookup = ((hostname, _options, callback) => {
    calls.push(hostname)
    let entry = table[hostname]
    if (Array.isArray(entry)) entry = entry.length > 1 ? entry.shift() as string : entry[0]
    if (entry === undefined) { callback(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), ''); return }
    if (typeof entry !== 'string') { callback(entry, ''); return }
    const addresses: LookupAddress[] = [{ address: entry, family: entry.includes(':') ? 6 : 4 }]
    callback(null, addresses)
  }) as LookupFunction & { calls: string[] }
  lookup.calls = calls
  return lookup
}

t.test('a reward and nothing else: success is derived from pass_threshold, output from message', async (t) => {
  const upstream = await startUpstream(t, json(200, { reward: 0.83 }))
  const { app } = await buildTestApp(t)
  const { status, body } = await verify(app, verifyBody('endpoint', `${upstream.url}/score`))
  t.equal(status, 200)
  t.equal(body.reward, 0.83)
  t.equal(body.success, true, '0.83 >= 0.6')
  t.equal(body.message, '')
  t.equal(body.output, '')
  t.same(body.verifier, { kind: 'endpoint', ref: `${upstream.url}/score`, status: 200, attempts: 1 })
  t.type(body.duration_ms, 'number')

  const low = await verify(app, verifyBody('endpoint', `${upstream.url}/score`, { verifier: { pass_threshold: 0.9 } }))
  t.equal(low.body.success, false, '0.83 < 0.9')
})

t.test('optional success, message and output are passed through; output defaults to message', async (t) => {
  const upstream = await startUpstream(t, json(200, { reward: 0.2, success: true, message: 'close enough' }))
  const { app } = await buildTestApp(t)
  const first = await verify(app, verifyBody('endpoint', upstream.url))
  t.equal(first.body.reward, 0.2)
  t.equal(first.body.success, true, 'the verifier\'s own word wins over the threshold')
  t.equal(first.body.output, 'close enough')
  upstream.handle(json(200, { reward: 1, message: 'ok', output: 'all 3 tests passed' }))
  const second = await verify(app, verifyBody('endpoint', upstream.url))
  t.equal(second.body.output, 'all 3 tests passed')
  t.equal(second.body.reward, 1)
})

t.test('the scorer receives {task, trajectory} as submitted, with user-agent and request id', async (t) => {
  const upstream = await startUpstream(t, json(200, { reward: 1 }))
  const { app } = await buildTestApp(t)
  const trajectory = [{ role: 'assistant', content: [{ type: 'text', text: '4' }] }, { tool: 'calc', result: 4 }]
  const task = { prompt: 'What is 2+2?', reference: '4', extra: { nested: [1, 2] } }
  const { status, headers } = await verify(app, verifyBody('endpoint', `${upstream.url}/score?x=1`, { task, trajectory }), { 'x-request-id': 'rollout-17.step-400' })
  t.equal(status, 200)
  t.equal(headers['x-request-id'], 'rollout-17.step-400')
  const [received] = upstream.received
  t.equal(received.method, 'POST')
  t.equal(received.url, '/score?x=1')
  t.same(JSON.parse(received.body), { task, trajectory })
  t.equal(received.headers['content-type'], 'application/json')
  t.equal(received.headers['user-agent'], `arbiter/${VERSION}`)
  t.equal(received.headers['x-request-id'], 'rollout-17.step-400')
})

t.test('bad rewards are errors, never zeros', async (t) => {
  const upstream = await startUpstream(t, json(200, {}))
  const { app } = await buildTestApp(t)
  const cases: Array<[string, string]> = [
    ['missing', '{"score": 1}'],
    ['null', '{"reward": null}'],
    ['a string', '{"reward": "0.5"}'],
    ['a boolean', '{"reward": false}'],
    ['non-finite', '{"reward": 1e400}'],
    ['an object', '{"reward": {"value": 1}}']
  ]
  for (const [name, answer] of cases) {
    upstream.handle(json(200, answer))
    const { status, body } = await verify(app, verifyBody('endpoint', upstream.url))
    t.equal(status, 502, name)
    t.equal(body.code, 'ARB_ENDPOINT_BAD_REWARD', name)
    t.same(body.verifier, { kind: 'endpoint', ref: upstream.url }, name)
    t.equal(body.retryable, false, name)
    t.notOk('reward' in body, `${name}: no reward in an error body`)
  }
})

t.test('answers that are not a JSON object', async (t) => {
  const upstream = await startUpstream(t, (_request, response) => {
    response.writeHead(200, { 'content-type': 'text/html' })
    response.end('<html><body>Login required</body></html>')
  })
  const { app } = await buildTestApp(t)
  const html = await verify(app, verifyBody('endpoint', upstream.url))
  t.equal(html.status, 502)
  t.equal(html.body.code, 'ARB_ENDPOINT_NOT_JSON')
  t.match(html.body.message, /Login required/, 'the message shows the start of the body')

  for (const answer of ['[0.5]', '0.5', '"1"', '']) {
    upstream.handle(json(200, answer))
    const { body } = await verify(app, verifyBody('endpoint', upstream.url))
    t.equal(body.code, 'ARB_ENDPOINT_NOT_JSON', `answer ${JSON.stringify(answer)}`)
  }

  upstream.handle(json(200, '{"reward": 1, "__proto__": {"polluted": true}}'))
  const poisoned = await verify(app, verifyBody('endpoint', upstream.url))
  t.equal(poisoned.body.code, 'ARB_ENDPOINT_NOT_JSON', 'prototype poisoning is refused')
  t.equal(({} as Record<string, unknown>).polluted, undefined)
})

t.test('optional fields of the wrong type are errors', async (t) => {
  const upstream = await startUpstream(t, json(200, { reward: 1, success: 'yes' }))
  const { app } = await buildTestApp(t)
  const { status, body } = await verify(app, verifyBody('endpoint', upstream.url))
  t.equal(status, 502)
  t.equal(body.code, 'ARB_ENDPOINT_BAD_RESPONSE')
  t.match(body.message, /success/)
})

t.test('non-2xx answers carry the status and the start of the body; only 429/5xx are retryable', async (t) => {
  const upstream = await startUpstream(t, json(400, { detail: 'task.reference is required' }))
  const { app } = await buildTestApp(t)
  const bad = await verify(app, verifyBody('endpoint', upstream.url))
  t.equal(bad.status, 502)
  t.equal(bad.body.code, 'ARB_ENDPOINT_HTTP_STATUS')
  t.match(bad.body.message, /400/)
  t.match(bad.body.message, /task\.reference is required/)
  t.equal(bad.body.retryable, false)
  t.same(bad.body.details, { status: 400 })

  upstream.handle(json(500, 'boom'))
  const before = upstream.received.length
  const crashed = await verify(app, verifyBody('endpoint', upstream.url))
  t.equal(crashed.body.code, 'ARB_ENDPOINT_HTTP_STATUS')
  t.equal(crashed.body.retryable, true, 'a 500 may succeed later')
  t.equal(upstream.received.length - before, 1, 'a 500 is never retried by Arbiter')
})

t.test('429 and 503 with Retry-After are retried inside the deadline, at most twice', async (t) => {
  let calls = 0
  const upstream = await startUpstream(t, (_request, response) => {
    calls++
    if (calls <= 2) {
      response.writeHead(calls === 1 ? 429 : 503, { 'retry-after': '0' })
      response.end('busy')
      return
    }
    response.writeHead(200, { 'content-type': 'application/json' })
    response.end('{"reward": 0.5}')
  })
  const { app } = await buildTestApp(t)
  const ok = await verify(app, verifyBody('endpoint', upstream.url))
  t.equal(ok.status, 200)
  t.equal(ok.body.reward, 0.5)
  t.equal(ok.body.verifier.attempts, 3)

  upstream.handle(json(503, 'still busy', { 'retry-after': '0' }))
  const before = upstream.received.length
  const exhausted = await verify(app, verifyBody('endpoint', upstream.url))
  t.equal(exhausted.body.code, 'ARB_ENDPOINT_HTTP_STATUS')
  t.equal(exhausted.body.retryable, true)
  t.equal(upstream.received.length - before, 3, 'one attempt and two retries')

  upstream.handle(json(503, 'no hint'))
  const noHint = upstream.received.length
  await verify(app, verifyBody('endpoint', upstream.url))
  t.equal(upstream.received.length - noHint, 1, 'a 503 without Retry-After is not retried')

  upstream.handle(json(503, 'later', { 'retry-after': '3600' }))
  const far = upstream.received.length
  const tooLate = await verify(app, verifyBody('endpoint', upstream.url))
  t.equal(tooLate.body.code, 'ARB_ENDPOINT_HTTP_STATUS')
  t.equal(upstream.received.length - far, 1, 'a Retry-After past the deadline is not waited for')
})

t.test('a redirect is never followed', async (t) => {
  const target = await startUpstream(t, json(200, { reward: 1 }))
  const upstream = await startUpstream(t, (_request, response) => {
    response.writeHead(302, { location: `${target.url}/elsewhere` })
    response.end()
  })
  const { app } = await buildTestApp(t)
  const { status, body } = await verify(app, verifyBody('endpoint', upstream.url))
  t.equal(status, 502)
  t.equal(body.code, 'ARB_ENDPOINT_REDIRECT')
  t.match(body.message, /elsewhere/)
  t.equal(target.received.length, 0)
})

t.test('an answer over the size cap is refused while reading, with or without content-length', async (t) => {
  const big = JSON.stringify({ reward: 1, message: 'x'.repeat(4096) })
  const upstream = await startUpstream(t, json(200, big))
  const { app } = await buildTestApp(t, { endpointMaxBytes: 1024 })
  const declared = await verify(app, verifyBody('endpoint', upstream.url))
  t.equal(declared.body.code, 'ARB_ENDPOINT_RESPONSE_TOO_LARGE')

  upstream.handle((_request, response) => {
    response.writeHead(200, { 'content-type': 'application/json' })
    for (let i = 0; i < 64; i++) response.write(' '.repeat(512))
    response.end('{"reward": 1}')
  })
  const chunked = await verify(app, verifyBody('endpoint', upstream.url))
  t.equal(chunked.body.code, 'ARB_ENDPOINT_RESPONSE_TOO_LARGE')
  t.equal(chunked.body.retryable, false)
})

t.test('connection refused is a retryable 502', async (t) => {
  const port = await freePort()
  const { app } = await buildTestApp(t)
  const { status, body } = await verify(app, verifyBody('endpoint', `http://127.0.0.1:${port}/score`))
  t.equal(status, 502)
  t.equal(body.code, 'ARB_ENDPOINT_CONNECTION_REFUSED')
  t.equal(body.retryable, true)
  t.match(body.message, String(port))
})

t.test('a reset before or during the answer is a 502 and is not retried', async (t) => {
  const upstream = await startUpstream(t, (request) => { request.socket.destroy() })
  const { app } = await buildTestApp(t)
  const before = await verify(app, verifyBody('endpoint', upstream.url))
  t.equal(before.body.code, 'ARB_ENDPOINT_CONNECTION_RESET')
  t.equal(upstream.received.length, 1, 'the request may have reached the scorer: no retry')

  upstream.handle((_request, response) => {
    response.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' })
    response.write('{"reward": ')
    setTimeout(() => response.socket?.destroy(), 20)
  })
  const during = await verify(app, verifyBody('endpoint', upstream.url))
  t.equal(during.body.code, 'ARB_ENDPOINT_CONNECTION_RESET')
})

t.test('a server that accepts and closes at once', async (t) => {
  const server: Server = createServer((socket) => socket.destroy())
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { server.close() })
  const { app } = await buildTestApp(t)
  const { status, body } = await verify(app, verifyBody('endpoint', `http://127.0.0.1:${(server.address() as { port: number }).port}/`))
  t.equal(status, 502)
  t.equal(body.code, 'ARB_ENDPOINT_CONNECTION_RESET')
})

t.test('the deadline covers a silent server and a dripping body alike', async (t) => {
  const upstream = await startUpstream(t, () => { /* never answers */ })
  const { app } = await buildTestApp(t)
  const silent = await verify(app, verifyBody('endpoint', upstream.url, { verifier: { timeout_s: 0.3 } }))
  t.equal(silent.status, 502)
  t.equal(silent.body.code, 'ARB_ENDPOINT_TIMEOUT')
  t.equal(silent.body.retryable, true)
  t.match(silent.body.message, /0\.3 s/)

  upstream.handle((_request, response) => {
    response.writeHead(200, { 'content-type': 'application/json' })
    const drip = setInterval(() => response.write(' '), 30)
    response.on('close', () => clearInterval(drip))
  })
  const dripping = await verify(app, verifyBody('endpoint', upstream.url, { verifier: { timeout_s: 0.4 } }))
  t.equal(dripping.body.code, 'ARB_ENDPOINT_TIMEOUT', 'gaps under undici\'s bodyTimeout still end at the deadline')
})

t.test('verifier.timeout_s is capped by ARBITER_MAX_TIMEOUT_S', async (t) => {
  const upstream = await startUpstream(t, () => { /* never answers */ })
  const { app } = await buildTestApp(t, { maxTimeoutS: 0.2 })
  const { body } = await verify(app, verifyBody('endpoint', upstream.url, { verifier: { timeout_s: 3600 } }))
  t.equal(body.code, 'ARB_ENDPOINT_TIMEOUT')
  t.match(body.message, /0\.2 s/)
})

t.test('DNS: a name that does not resolve, and a transient failure that is retried', async (t) => {
  const upstream = await startUpstream(t, json(200, { reward: 0.7 }))
  const flaky = Object.assign(new Error('getaddrinfo EAI_AGAIN flaky.test'), { code: 'EAI_AGAIN' })
  const lookup = fakeDns({ 'flaky.test': [flaky, '127.0.0.1'] })
  const { app } = await buildTestApp(t, {}, { lookup })
  const missing = await verify(app, verifyBody('endpoint', 'http://nowhere.test/score'))
  t.equal(missing.status, 502)
  t.equal(missing.body.code, 'ARB_ENDPOINT_DNS_FAILED')
  t.match(missing.body.message, /nowhere\.test/)

  const retried = await verify(app, verifyBody('endpoint', `http://flaky.test:${upstream.port}/score`))
  t.equal(retried.status, 200)
  t.equal(retried.body.reward, 0.7)
  t.equal(retried.body.verifier.attempts, 2)
})

t.test('egress guard: metadata and link-local addresses are refused however they are spelled', async (t) => {
  const lookup = fakeDns({ 'rebind.test': '169.254.169.254', 'v6meta.test': 'fd00:ec2::254' })
  const { app } = await buildTestApp(t, {}, { lookup })
  const refs = [
    'http://169.254.169.254/latest/meta-data/',
    'http://2852039166/',
    'http://0xa9.0xfe.0xa9.0xfe/',
    'http://[::ffff:a9fe:a9fe]/',
    'http://[fe80::1]/',
    'http://[fd00:ec2::254]/',
    'http://0.0.0.0:8080/',
    'http://[::]/',
    'http://224.0.0.1/',
    'http://rebind.test/score',
    'http://v6meta.test/score'
  ]
  for (const ref of refs) {
    const { status, body } = await verify(app, verifyBody('endpoint', ref))
    t.equal(status, 502, ref)
    t.equal(body.code, 'ARB_ENDPOINT_FORBIDDEN', ref)
    t.equal(body.retryable, false, ref)
  }
  t.same(lookup.calls, ['rebind.test', 'v6meta.test'], 'IP literals are refused before any lookup; names after it')
})

t.test('egress guard: loopback is allowed by default, even written as a number', async (t) => {
  const upstream = await startUpstream(t, json(200, { reward: 1 }))
  const { app } = await buildTestApp(t)
  for (const host of [`127.0.0.1:${upstream.port}`, `2130706433:${upstream.port}`, `0x7f.1:${upstream.port}`]) {
    const { status } = await verify(app, verifyBody('endpoint', `http://${host}/score`))
    t.equal(status, 200, host)
  }
})

t.test('egress guard: ARBITER_ENDPOINT_ALLOW restricts endpoints to what it names, and no socket opens otherwise', async (t) => {
  const upstream = await startUpstream(t, json(200, { reward: 1 }))
  const counted = await startUpstream(t, json(200, { reward: 1 }))
  const lookup = fakeDns({ 'scorer.test': '127.0.0.1', 'evil.test': '10.0.0.1', 'grader.corp.test': '127.0.0.1' })

  const byOrigin = await buildTestApp(t, { endpointAllow: [upstream.url] }, { lookup })
  t.equal((await verify(byOrigin.app, verifyBody('endpoint', `${upstream.url}/score`))).status, 200, 'the named origin')
  const other = await verify(byOrigin.app, verifyBody('endpoint', `${counted.url}/score`))
  t.equal(other.body.code, 'ARB_ENDPOINT_FORBIDDEN', 'another port on the same host is another origin')
  t.match(other.body.message, /ARBITER_ENDPOINT_ALLOW/)
  t.equal(counted.connections(), 0, 'no socket was opened to the refused server')

  const byCidr = await buildTestApp(t, { endpointAllow: ['127.0.0.0/8'] }, { lookup })
  t.equal((await verify(byCidr.app, verifyBody('endpoint', `http://scorer.test:${upstream.port}/`))).status, 200, 'a name resolving inside the CIDR')
  const outside = await verify(byCidr.app, verifyBody('endpoint', 'http://evil.test/'))
  t.equal(outside.body.code, 'ARB_ENDPOINT_FORBIDDEN', 'a name resolving outside the CIDR')
  t.match(outside.body.message, /10\.0\.0\.1/)

  const byHost = await buildTestApp(t, { endpointAllow: ['*.corp.test'] }, { lookup })
  t.equal((await verify(byHost.app, verifyBody('endpoint', `http://grader.corp.test:${upstream.port}/`))).status, 200, 'a wildcard host')
  const literal = await verify(byHost.app, verifyBody('endpoint', `${counted.url}/`))
  t.equal(literal.body.code, 'ARB_ENDPOINT_FORBIDDEN', 'an IP literal not named by the list')
  t.equal(counted.connections(), 0)
})

t.test('refs that are not http(s) URLs are a 400 naming the field', async (t) => {
  const { app } = await buildTestApp(t)
  for (const ref of ['file:///etc/passwd', 'ftp://example.com/x', 'not a url', 'http://user:pass@127.0.0.1/']) {
    const { status, body } = await verify(app, verifyBody('endpoint', ref))
    t.equal(status, 400, ref)
    t.equal(body.code, 'ARB_BAD_REQUEST')
    t.match(body.message, /manifest\.verifier\.ref/)
  }
})
