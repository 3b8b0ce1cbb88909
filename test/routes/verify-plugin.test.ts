// POST /v1/verify with the plugin kind, through the HTTP layer, against real workers running
// examples/plugins: a 200 with the reward, and a 502 body that names kind and ref.
import t from 'tap'
import { fileURLToPath } from 'node:url'
import { createPluginKind } from '../../src/kinds/plugin/index.js'
import { digestFolder } from '../../src/kinds/plugin/digest.js'
import { buildTestApp } from '../helpers/build-app.js'

const EXAMPLES = fileURLToPath(new URL('../../examples/plugins', import.meta.url))
const quiet = { debug () {}, info () {}, warn () {}, error () {} }

t.test('plugin verifiers over HTTP', async (t) => {
  const plugin = await createPluginKind({ pluginsDir: EXAMPLES, workers: 1, memoryMb: 512, idleS: 60, maxCalls: 10_000, log: quiet })
  const { app } = await buildTestApp(t, {}, { kinds: [plugin] })
  const digest = await digestFolder(`${EXAMPLES}/arithmetic`)

  const ok = await app.inject({
    method: 'POST',
    url: '/v1/verify',
    payload: {
      manifest: { name: 'arithmetic', version: '1.0.0', digest, verifier: { kind: 'plugin', ref: 'verify:score_arithmetic' } },
      task: { prompt: 'What is 2+2?', reference: '4' },
      trajectory: 'The answer is 4'
    }
  })
  t.equal(ok.statusCode, 200, ok.body)
  const body = ok.json()
  t.match(body, { reward: 1, success: true, verifier: { kind: 'plugin', ref: 'verify:score_arithmetic', plugin: 'arithmetic', version: '1.0.0', digest, runtime: 'python' } })
  t.strictSame(body.verifier, { kind: 'plugin', ref: 'verify:score_arithmetic', plugin: 'arithmetic', version: '1.0.0', digest, runtime: 'python' }, 'exactly, version a string')
  t.type(body.duration_ms, 'number')

  const js = await app.inject({
    method: 'POST',
    url: '/v1/verify',
    payload: { manifest: { name: 'exact-match-js', verifier: { kind: 'plugin', ref: 'verify:exactMatch' } }, task: { reference: 'Paris' }, trajectory: 'Lyon' }
  })
  t.equal(js.statusCode, 200, js.body)
  t.match(js.json(), { reward: 0, success: false, message: /expected "Paris"/ })

  const raised = await app.inject({
    method: 'POST',
    url: '/v1/verify',
    headers: { 'x-request-id': 'plugin-502' },
    payload: { manifest: { name: 'arithmetic', verifier: { kind: 'plugin', ref: 'strict:score' } }, task: { prompt: 'What is 2+2?' }, trajectory: 'The answer is 4' }
  })
  t.equal(raised.statusCode, 502)
  t.match(raised.json(), {
    statusCode: 502,
    error: 'Bad Gateway',
    code: 'ARB_PLUGIN_RAISED',
    message: 'this task has no reference; it cannot be scored',
    verifier: { kind: 'plugin', ref: 'strict:score' },
    retryable: false,
    requestId: 'plugin-502'
  })
  t.notOk('reward' in raised.json(), 'a failed verification carries no reward')
  t.notMatch(raised.body, /Traceback/, 'no stack trace reaches the client')

  const listed = await app.inject({ method: 'GET', url: '/v1/verifiers' })
  t.equal(listed.statusCode, 200)
  t.match(listed.body, digest, 'GET /v1/verifiers lists the plugin digest')
})
