// clients/python/arbiter_client.py, run by a real python3 against a scripted node:http server on
// 127.0.0.1. test/fixtures/python-client/drive.py makes one call and prints what happened as JSON.
import t from 'tap'
import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { buildTestApp, type TestContext } from './helpers/build-app.js'
import { freePort } from './helpers/ports.js'
import { scripted, startUpstream, type ScriptStep, type SeenRequest } from './helpers/upstream.js'

const DRIVER = fileURLToPath(new URL('./fixtures/python-client/drive.py', import.meta.url))
const PYTHON = process.env.ARBITER_TEST_PYTHON ?? 'python3'

async function serve (t: TestContext, steps: ScriptStep[]): Promise<{ url: string, seen: SeenRequest[] }> {
  const seen: SeenRequest[] = []
  const upstream = await startUpstream(t, scripted(steps, seen))
  return { url: upstream.url, seen }
}

interface Outcome {
  ok?: any
  is_error?: boolean[]
  error?: { type: string, code: string, status: number | null, retryable: boolean, verifier: any, request_id: string | null, requestId: string | null, attempts: number, body: any, message: string, is_exception: boolean }
  retries: Array<{ attempt: number, delay: number, code: string, retry_after: number | null, items: number[] | null }>
}

/** Runs the driver asynchronously (the scripted server lives in this process's event loop). */
function drive (spec: Record<string, unknown>): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    execFile(PYTHON, [DRIVER, JSON.stringify(spec)], { env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' }, timeout: 60_000 }, (error, stdout, stderr) => {
      if (error !== null) return reject(new Error(`python driver failed: ${error.message}\n${stderr}`))
      try {
        resolve(JSON.parse(stdout) as Outcome)
      } catch {
        reject(new Error(`python driver printed no JSON: ${stdout}\n${stderr}`))
      }
    })
  })
}

const manifest = { name: 'arithmetic', version: '1.0.0', verifier: { kind: 'endpoint', ref: 'http://127.0.0.1:9/score' } }
const verifierId = { kind: 'endpoint', ref: manifest.verifier.ref }
const args = { manifest, task: { prompt: '2+2', reference: '4' }, trajectory: [{ role: 'assistant', content: '4' }] }
const result = { reward: 0.75, success: true, message: 'ok', output: 'ok', verifier: verifierId, duration_ms: 2 }
const fast = { base_delay: 0.005, max_delay: 0.02 }

function errorBody (statusCode: number, code: string, retryable: boolean, extra: Record<string, unknown> = {}) {
  return { statusCode, error: 'Error', code, message: `${code} happened`, retryable, requestId: 'req-py', ...extra }
}

t.test('verify: result returned; token, request id and body on the wire', async (t) => {
  const server = await serve(t, [{ status: 200, json: result }])
  const out = await drive({ base_url: server.url + '/', call: 'verify', client: { token: 'tok-1', ...fast }, args: { ...args, request_id: 'rollout-3' } })
  t.same(out.ok, result)
  t.equal(server.seen.length, 1)
  t.equal(server.seen[0].url, '/v1/verify')
  t.equal(server.seen[0].headers.authorization, 'Bearer tok-1')
  t.equal(server.seen[0].headers['x-request-id'], 'rollout-3')
  t.match(server.seen[0].headers['content-type'], /^application\/json/)
  t.same(server.seen[0].body, args)
})

t.test('503 with Retry-After is waited out, then the 200 returned', async (t) => {
  const server = await serve(t, [
    { status: 503, json: errorBody(503, 'ARB_OVERLOADED', true), headers: { 'retry-after': '1' } },
    { status: 200, json: result }
  ])
  const out = await drive({ base_url: server.url, call: 'verify', client: fast, args })
  t.equal(out.ok?.reward, 0.75)
  t.equal(server.seen.length, 2)
  t.equal(out.retries.length, 1)
  t.equal(out.retries[0].code, 'ARB_OVERLOADED')
  t.equal(out.retries[0].retry_after, 1)
  t.ok(out.retries[0].delay >= 1 && out.retries[0].delay <= 1.1, `waits Retry-After plus at most 10% (${out.retries[0].delay})`)
})

t.test('a capped Retry-After, and one beyond the deadline gives up with the server\'s error', async (t) => {
  const server = await serve(t, [
    { status: 503, json: errorBody(503, 'ARB_SHUTTING_DOWN', true), headers: { 'retry-after': '120' } },
    { status: 200, json: result },
    { status: 503, json: errorBody(503, 'ARB_OVERLOADED', true), headers: { 'retry-after': '30' } }
  ])
  const capped = await drive({ base_url: server.url, call: 'verify', client: { ...fast, max_retry_after: 0.02 }, args })
  t.equal(capped.ok?.reward, 0.75)
  t.ok(capped.retries[0].delay >= 0.02 && capped.retries[0].delay <= 0.022, `capped (${capped.retries[0].delay})`)
  const beyond = await drive({ base_url: server.url, call: 'verify', client: { ...fast, timeout: 2 }, args })
  t.equal(beyond.error?.code, 'ARB_OVERLOADED')
  t.equal(beyond.error?.attempts, 1)
  t.equal(beyond.retries.length, 0)
  t.equal(server.seen.length, 3)
})

t.test('a 502 marked retryable: false raises ArbiterError at once with code, verifier, retryable, requestId', async (t) => {
  const body = errorBody(502, 'ARB_PLUGIN_RAISED', false, { verifier: verifierId, requestId: 'req-77' })
  const server = await serve(t, [{ status: 502, json: body }, { status: 200, json: result }])
  const out = await drive({ base_url: server.url, call: 'verify', client: fast, args })
  t.equal(server.seen.length, 1, 'not retried')
  t.same(out.error, {
    type: 'ArbiterError',
    code: 'ARB_PLUGIN_RAISED',
    status: 502,
    retryable: false,
    verifier: verifierId,
    request_id: 'req-77',
    requestId: 'req-77',
    attempts: 1,
    body,
    message: 'ARB_PLUGIN_RAISED (endpoint http://127.0.0.1:9/score): ARB_PLUGIN_RAISED happened',
    is_exception: true
  })
})

t.test('a 502 marked retryable: true is retried; attempts are bounded', async (t) => {
  const retryable = { status: 502, json: errorBody(502, 'ARB_ENDPOINT_TIMEOUT', true, { verifier: verifierId }) }
  const server = await serve(t, [retryable, { status: 200, json: result }, retryable, retryable, retryable])
  const recovered = await drive({ base_url: server.url, call: 'verify', client: fast, args })
  t.equal(recovered.ok?.reward, 0.75)
  t.same(recovered.retries.map((r) => r.code), ['ARB_ENDPOINT_TIMEOUT'])
  t.ok(recovered.retries[0].delay >= 0 && recovered.retries[0].delay <= 0.02, 'jittered backoff within its bound')
  const exhausted = await drive({ base_url: server.url, call: 'verify', client: { ...fast, max_attempts: 3 }, args })
  t.equal(exhausted.error?.code, 'ARB_ENDPOINT_TIMEOUT')
  t.equal(exhausted.error?.retryable, true)
  t.equal(exhausted.error?.attempts, 3)
  t.equal(server.seen.length, 5)
})

t.test('400 is never retried; a proxy page is retried only as a 503 with Retry-After', async (t) => {
  const server = await serve(t, [
    { status: 400, json: errorBody(400, 'ARB_BAD_REQUEST', false) },
    { status: 503, text: '<html>draining</html>', headers: { 'retry-after': '0' } },
    { status: 200, json: result },
    { status: 502, text: '<html>bad gateway</html>' },
    { status: 307, text: 'moved', headers: { location: '/elsewhere' } }
  ])
  t.equal((await drive({ base_url: server.url, call: 'verify', client: fast, args })).error?.code, 'ARB_BAD_REQUEST')
  t.equal((await drive({ base_url: server.url, call: 'verify', client: fast, args })).ok?.reward, 0.75)
  const proxy = await drive({ base_url: server.url, call: 'verify', client: fast, args })
  t.equal(proxy.error?.code, 'CLIENT_HTTP_STATUS')
  t.equal(proxy.error?.status, 502)
  t.equal(proxy.error?.retryable, false)
  const redirect = await drive({ base_url: server.url, call: 'verify', client: fast, args })
  t.equal(redirect.error?.status, 307, 'a redirect is reported, not followed')
  t.equal(server.seen.length, 5)
})

t.test('a 200 without a finite numeric reward is an error, never a 0', async (t) => {
  const server = await serve(t, [
    { status: 200, json: { reward: null, verifier: verifierId } },
    { status: 200, json: { reward: true, verifier: verifierId } },
    { status: 200, text: '{"reward": NaN}' },
    { status: 200, text: '<html>' }
  ])
  for (let i = 0; i < 4; i++) {
    const out = await drive({ base_url: server.url, call: 'verify', client: fast, args })
    t.equal(out.error?.code, 'CLIENT_BAD_RESPONSE', `answer ${i}`)
  }
  t.equal(server.seen.length, 4)
})

t.test('connection refused is retried up to max_attempts; a hang ends at the deadline', async (t) => {
  const port = await freePort()
  const refused = await drive({ base_url: `http://127.0.0.1:${port}`, call: 'verify', client: { ...fast, max_attempts: 3 }, args })
  t.equal(refused.error?.code, 'CLIENT_CONNECTION_FAILED')
  t.equal(refused.error?.retryable, true)
  t.equal(refused.error?.attempts, 3)
  t.equal(refused.retries.length, 2)
  t.match(refused.error?.message, /refused/i)

  const server = await serve(t, ['hang'])
  const hung = await drive({ base_url: server.url, call: 'verify', client: fast, args: { ...args, timeout: 0.5 } })
  t.equal(hung.error?.code, 'CLIENT_TIMEOUT')
  t.equal(server.seen.length, 1)
})

t.test('verify_batch: shared manifest, in order; only retryable entries sent again', async (t) => {
  const r = (reward: number) => ({ ...result, reward })
  const timeout = errorBody(502, 'ARB_ENDPOINT_TIMEOUT', true, { verifier: verifierId })
  const final = errorBody(502, 'ARB_ENDPOINT_BAD_REWARD', false, { verifier: verifierId })
  const server = await serve(t, [
    { status: 200, json: { results: [r(1), timeout, final] } },
    { status: 200, json: { results: [r(0)] } }
  ])
  const items = [0, 1, 2].map((i) => ({ task: { prompt: `q${i}` }, trajectory: `a${i}` }))
  const out = await drive({ base_url: server.url, call: 'verify_batch', client: fast, args: { items, manifest } })
  t.same(server.seen[0].body, { items, manifest })
  t.equal(server.seen[0].url, '/v1/verify/batch')
  t.same(server.seen[1].body, { items: [items[1]], manifest })
  t.same(out.retries.map((event) => event.items), [[1]])
  t.same(out.is_error, [false, false, true])
  t.same(out.ok.map((entry: any) => entry.reward ?? entry.code), [1, 0, 'ARB_ENDPOINT_BAD_REWARD'])
})

t.test('verify_batch: per-item manifests; the envelope\'s own error raises; a short answer is bad', async (t) => {
  const server = await serve(t, [
    { status: 200, json: { results: [result] } },
    { status: 401, json: errorBody(401, 'ARB_UNAUTHORIZED', false) },
    { status: 200, json: { results: [] } }
  ])
  const items = [args]
  const ok = await drive({ base_url: server.url, call: 'verify_batch', client: fast, args: { items } })
  t.same(server.seen[0].body, { items }, 'no manifest key when items carry their own')
  t.same(ok.ok, [result])
  t.equal((await drive({ base_url: server.url, call: 'verify_batch', client: fast, args: { items } })).error?.code, 'ARB_UNAUTHORIZED')
  t.equal((await drive({ base_url: server.url, call: 'verify_batch', client: fast, args: { items } })).error?.code, 'CLIENT_BAD_RESPONSE')
})

t.test('module-level verify(), parse_retry_after and option checks', async (t) => {
  const server = await serve(t, [{ status: 200, json: result }])
  t.same((await drive({ base_url: server.url, call: 'module_verify', client: { timeout: 5 }, args })).ok, result)
  const parsed = await drive({ call: 'parse_retry_after', args: { values: ['3', ' 0 ', 'soon', null, 'Thu, 01 Jan 1970 00:00:10 GMT', '-1'], now: 5 } })
  t.same(parsed.ok, [3, 0, null, null, 5, null])
  t.match((await drive({ base_url: 'arbiter:8080', call: 'construct' })).ok, /^ValueError/)
  t.match((await drive({ base_url: 'http://127.0.0.1', call: 'construct', client: { max_attempts: 0 } })).ok, /^ValueError/)
  t.equal((await drive({ base_url: 'http://127.0.0.1', call: 'construct' })).ok, 'constructed')
})

t.test('against the real app: a verify, a batch with one failing item, an ArbiterError', async (t) => {
  const scorer = await startUpstream(t, (_request, response, received) => {
    const { trajectory } = JSON.parse(received.body) as { trajectory: string }
    response.writeHead(200, { 'content-type': 'application/json' })
    response.end(JSON.stringify(trajectory === 'garbled' ? { reward: null } : { reward: 1, success: true, message: 'right' }))
  })
  const { app } = await buildTestApp(t)
  const address = await app.listen({ port: 0, host: '127.0.0.1' })
  const shared = { name: 'scorer', version: '1.0.0', verifier: { kind: 'endpoint', ref: `${scorer.url}/score` } }

  const single = await drive({ base_url: address, call: 'verify', client: fast, args: { manifest: shared, task: { prompt: 'p' }, trajectory: 'four', request_id: 'py-e2e-1' } })
  t.equal(single.ok?.reward, 1)
  t.equal(single.ok?.success, true)
  t.equal(single.ok?.verifier?.kind, 'endpoint')

  const items = ['four', 'garbled'].map((trajectory) => ({ task: { prompt: 'p' }, trajectory }))
  const batch = await drive({ base_url: address, call: 'verify_batch', client: fast, args: { items, manifest: shared } })
  t.same(batch.is_error, [false, true])
  t.equal(batch.ok[1].code, 'ARB_ENDPOINT_BAD_REWARD')
  t.equal(batch.retries.length, 0, 'a non-retryable item is not sent again')

  const failed = await drive({ base_url: address, call: 'verify', client: fast, args: { manifest: shared, task: { prompt: 'p' }, trajectory: 'garbled', request_id: 'py-e2e-2' } })
  t.equal(failed.error?.code, 'ARB_ENDPOINT_BAD_REWARD')
  t.equal(failed.error?.status, 502)
  t.equal(failed.error?.retryable, false)
  t.equal(failed.error?.request_id, 'py-e2e-2')
  t.same(failed.error?.verifier, { kind: 'endpoint', ref: `${scorer.url}/score` })
  t.equal(scorer.received.length, 4)
})
