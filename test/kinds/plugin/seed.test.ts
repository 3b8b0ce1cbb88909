// The seed's own example, byte for byte, through real Python workers.
import t from 'tap'
import { readFile } from 'node:fs/promises'
import { EXAMPLES, call, failure, makeKind } from './helpers.js'

const SEED_VERIFY_PY = `from typing import Any, Mapping

def score_arithmetic(task: Mapping[str, Any], trajectory: Any) -> float:
    expected = str(task.get("reference", "")).strip()
    answer = str(trajectory).strip().split()[-1] if trajectory else ""
    return 1.0 if answer == expected else 0.0
`

t.test('examples/plugins/arithmetic/verify.py is the seed example byte for byte', async (t) => {
  t.equal(await readFile(`${EXAMPLES}/arithmetic/verify.py`, 'utf8'), SEED_VERIFY_PY)
})

t.test('the seed example scores 1.0 and 0.0, and the strict variant raises', async (t) => {
  const kind = await makeKind(t, { pluginsDir: EXAMPLES })
  const right = await call(kind, 'arithmetic', 'verify:score_arithmetic', { prompt: '2+2?', reference: '4' }, 'The answer is 4')
  t.equal(right.reward, 1.0)
  t.equal((right as { success: boolean }).success, true)
  t.match(right.verifier, { kind: 'plugin', ref: 'verify:score_arithmetic', plugin: 'arithmetic', version: '1.0.0', runtime: 'python', digest: /^sha256:[0-9a-f]{64}$/ })

  const wrong = await call(kind, 'arithmetic', 'verify:score_arithmetic', { prompt: '2+2?', reference: '4' }, 'The answer is 5')
  t.equal(wrong.reward, 0.0)
  t.equal((wrong as { success: boolean }).success, false)

  const error = await failure(call(kind, 'arithmetic', 'strict:score', { prompt: '2+2?' }, 'The answer is 4'))
  t.equal(error.code, 'ARB_PLUGIN_RAISED')
  t.equal(error.statusCode, 502)
  t.equal(error.retryable, false)
  t.equal(error.message, 'this task has no reference; it cannot be scored')
  t.same(error.verifier, { kind: 'plugin', ref: 'strict:score' })
  t.same(error.details, { exception: 'ValueError' })
})

t.test('the JavaScript example', async (t) => {
  const kind = await makeKind(t, { pluginsDir: EXAMPLES })
  const right = await call(kind, 'exact-match-js', 'verify:exactMatch', { reference: 'Paris' }, [{ role: 'assistant', content: ' Paris ' }])
  t.equal(right.reward, 1)
  t.equal((right as { message: string }).message, 'exact match')
  const wrong = await call(kind, 'exact-match-js', 'verify:exactMatch', { reference: 'Paris' }, 'Lyon')
  t.equal(wrong.reward, 0)
  const error = await failure(call(kind, 'exact-match-js', 'verify:exactMatch', {}, 'Lyon'))
  t.equal(error.code, 'ARB_PLUGIN_RAISED')
  t.equal(error.message, 'this task has no reference; it cannot be scored')
})
