import t from 'tap'
import { ArbiterError, DuplicateKindError, VerificationError } from '../src/errors.js'
import { Registry, type KindHandler, type Log } from '../src/registry.js'

const silent: Log = { debug () {}, info () {}, warn () {}, error () {} }

function handler (kind: 'plugin' | 'rubric' | 'endpoint', verify: KindHandler['verify']): KindHandler {
  return { kind, defaultTimeoutS: 60, verify, describe: () => ({}) }
}

const request = (kind: 'plugin' | 'rubric' | 'endpoint', ref: string, extra: Record<string, unknown> = {}) => [
  { manifest: { verifier: { kind, ref, ...extra } }, task: {}, trajectory: 'x' }, { requestId: 'r', log: silent }
] as const

t.test('a kind is registered once', async (t) => {
  const registry = new Registry({ maxTimeoutS: 600 })
  registry.add(handler('plugin', async () => ({ reward: 1, success: true, message: '', output: '', verifier: { kind: 'plugin', ref: 'a:b' } })))
  t.throws(() => registry.add(handler('plugin', async () => { throw new Error('unused') })), DuplicateKindError)
})

t.test('an unregistered kind is a 502 naming kind and ref', async (t) => {
  const registry = new Registry({ maxTimeoutS: 600 })
  await t.rejects(registry.verify(...request('rubric', 'alice/x')), { code: 'ARB_KIND_UNAVAILABLE', statusCode: 502, verifier: { kind: 'rubric', ref: 'alice/x' } })
})

t.test('a handler that crashes or returns no finite reward is a 502, never a 0', async (t) => {
  const registry = new Registry({ maxTimeoutS: 600 })
  let answer: unknown
  registry.add(handler('plugin', async () => {
    if (answer instanceof Error) throw answer
    return answer as never
  }))
  for (const bad of [undefined, null, {}, { reward: null }, { reward: Number.NaN }, { reward: Infinity }, { reward: '1' }, new TypeError('x is undefined')]) {
    answer = bad
    const error = await registry.verify(...request('plugin', 'verify:score')).catch((e: unknown) => e)
    t.ok(error instanceof VerificationError, String(bad))
    t.match(error, { code: 'ARB_VERIFIER_FAILED', statusCode: 502, verifier: { kind: 'plugin', ref: 'verify:score' } })
  }
})

t.test('a result that does not name its verifier is a 502, not a 500 from the serializer', async (t) => {
  const registry = new Registry({ maxTimeoutS: 600 })
  let verifier: unknown
  registry.add(handler('plugin', async () => ({ reward: 1, success: true, message: '', output: '', verifier }) as never))
  for (const bad of [undefined, null, {}, { kind: 'plugin' }, { kind: 'plugin', ref: 7 }]) {
    verifier = bad
    await t.rejects(registry.verify(...request('plugin', 'verify:score')), { code: 'ARB_VERIFIER_FAILED', statusCode: 502, verifier: { kind: 'plugin', ref: 'verify:score' } }, JSON.stringify(bad))
  }
})

t.test('an ArbiterError from a kind names the verifier and keeps its details; an internal one is a 502', async (t) => {
  const registry = new Registry({ maxTimeoutS: 600 })
  let thrown: Error = new Error('unset')
  registry.add(handler('endpoint', async () => { throw thrown }))
  thrown = new ArbiterError('ARB_ENDPOINT_HTTP_STATUS', 'endpoint answered 503', { details: { status: 503 }, retryAfter: 2 })
  await t.rejects(registry.verify(...request('endpoint', 'http://x/score')), { code: 'ARB_ENDPOINT_HTTP_STATUS', statusCode: 502, details: { status: 503 }, retryAfter: 2, verifier: { kind: 'endpoint', ref: 'http://x/score' } })
  thrown = new ArbiterError('ARB_INTERNAL', 'a bug inside the kind')
  await t.rejects(registry.verify(...request('endpoint', 'http://x/score')), { code: 'ARB_VERIFIER_FAILED', statusCode: 502, message: 'a bug inside the kind', verifier: { kind: 'endpoint', ref: 'http://x/score' } })
})

t.test('the deadline is the manifest\'s timeout_s or the kind default, capped', async (t) => {
  const registry = new Registry({ maxTimeoutS: 100 })
  const seen: number[] = []
  registry.add(handler('endpoint', async (context) => {
    seen.push(context.timeoutMs)
    return { reward: 1, success: true, message: '', output: '', verifier: { kind: 'endpoint', ref: 'x' } }
  }))
  await registry.verify(...request('endpoint', 'x'))
  await registry.verify(...request('endpoint', 'x', { timeout_s: 5 }))
  await registry.verify(...request('endpoint', 'x', { timeout_s: 5000 }))
  t.same(seen, [60_000, 5000, 100_000])
})
