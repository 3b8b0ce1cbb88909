// What a verifier may return, in both runtimes: Python's own float() rules, result objects,
// sync and async callables; and every way of returning something that is not a reward.
import t from 'tap'
import { call, failure, makeKind } from './helpers.js'

t.test('python: float() edge cases are applied by Python itself', async (t) => {
  const kind = await makeKind(t)
  const reward = async (as: string, value?: unknown): Promise<number> => (await call(kind, 'py-edge', 'verify:returns', { as, value })).reward
  t.equal(await reward('true'), 1.0, 'True')
  t.equal(await reward('json', ' 1.5 '), 1.5, '" 1.5 "')
  t.equal(await reward('json', '1_000'), 1000, '"1_000"')
  t.equal(await reward('json', 0), 0, 'a real 0 is a reward like any other')
  t.equal(await reward('json', 7), 7, 'int')
  t.equal(await reward('dunder'), 0.5, '__float__')
  // A plain float is written by the worker's fast path; every double comes back exactly, in
  // every form Python's repr gives it (exponents, -0.0).
  for (const text of ['0.1', '-2.5', '1e-300', '1.7976931348623157e308', '5e-324', '123456.789', '-0.0001', '1e16', '-1e+22', '0.0', '-0.0']) {
    const value = Number(text)
    const got = await reward('float', text)
    t.ok(Object.is(got, value), `float(${JSON.stringify(text)}) comes back as ${Object.is(value, -0) ? '-0' : value}, got ${Object.is(got, -0) ? '-0' : got}`)
  }

  for (const [as, value, pattern] of [
    ['nan', undefined, /not a finite number \(nan\)/],
    ['inf', undefined, /not a finite number \(-inf\)/],
    ['json', 'nan', /not a finite number/],
    ['json', 'Infinity', /not a finite number/],
    ['none', undefined, /float\(\) accepts: TypeError/],
    ['json', null, /float\(\) accepts: TypeError/],
    ['json', 'abc', /ValueError: could not convert string to float/],
    ['json', '', /ValueError/],
    ['json', false, /x/],
    ['big', undefined, /OverflowError/],
    ['list', undefined, /TypeError/],
    ['json', { message: 'no reward, no success' }, /neither reward nor success/],
    ['json', { reward: null }, /reward is not something float\(\) accepts/],
    ['json', { reward: 'NaN' }, /reward is not a finite number/],
    ['json', { reward: 1, success: 'yes' }, /success must be a bool/]
  ] as Array<[string, unknown, RegExp]>) {
    if (as === 'json' && value === false) {
      t.equal(await reward('json', false), 0, 'False is what float() makes of it: 0.0')
      continue
    }
    const error = await failure(call(kind, 'py-edge', 'verify:returns', { as, value }))
    t.equal(error.code, 'ARB_PLUGIN_BAD_RETURN', `${as} ${JSON.stringify(value)} is a bad return`)
    t.match(error.message, pattern)
    t.equal(error.statusCode, 502)
  }
})

t.test('python: mappings and result objects', async (t) => {
  const kind = await makeKind(t)
  const dict = await call(kind, 'py-edge', 'verify:returns', { as: 'json', value: { reward: 0.7, message: 'close', output: 'details' } })
  t.match(dict, { reward: 0.7, success: true, message: 'close', output: 'details' })
  const own = await call(kind, 'py-edge', 'verify:returns', { as: 'json', value: { reward: 0.9, success: false, message: 'vetoed' } })
  t.match(own, { reward: 0.9, success: false, message: 'vetoed', output: 'vetoed' }, 'the verifier\'s own success wins; output defaults to message')
  const str = await call(kind, 'py-edge', 'verify:returns', { as: 'json', value: { reward: ' 0.5 ' } })
  t.equal(str.reward, 0.5, 'a reward field goes through float() too')
  const passed = await call(kind, 'py-edge', 'verify:returns', { as: 'verifier_result', value: true })
  t.match(passed, { reward: 1.0, success: true, message: 'checked' })
  const failed = await call(kind, 'py-edge', 'verify:returns', { as: 'verifier_result', value: false })
  t.match(failed, { reward: 0.0, success: false, message: 'checked' })
  const obj = await call(kind, 'py-edge', 'verify:returns', { as: 'object_reward' })
  t.match(obj, { reward: 0.25, success: false, message: 'from an object' })
  const threshold = await call(kind, 'py-edge', 'verify:returns', { as: 'json', value: 0.3 }, '', { passThreshold: 0.25 })
  t.equal((threshold as { success: boolean }).success, true, 'pass_threshold decides success when the verifier does not')
})

t.test('python: async callables, arguments as submitted, packages', async (t) => {
  const kind = await makeKind(t)
  t.equal((await call(kind, 'py-edge', 'verify:async_score')).reward, 0.75)
  const trajectory = [{ role: 'user', content: 'hi' }, { role: 'assistant', content: [{ type: 'text', text: '4' }] }]
  const echoed = await call(kind, 'py-edge', 'verify:echo', { prompt: 'p', reference: 'r', n: 1.5 }, trajectory)
  t.same(JSON.parse((echoed as { message: string }).message), { task: { prompt: 'p', reference: 'r', n: 1.5 }, trajectory })
  t.equal((await call(kind, 'py-pkg', 'pkg.sub.mod:score')).reward, 0.5, 'a dotted module inside a package, with a relative import')
})

t.test('python: import and lookup failures', async (t) => {
  const kind = await makeKind(t)
  const imported = await failure(call(kind, 'broken-import', 'verify:score'))
  t.equal(imported.code, 'ARB_PLUGIN_IMPORT_FAILED')
  t.match(imported.message, /ModuleNotFoundError: No module named 'a_module_that_is_not_installed'/)
  t.ok(kind.log.lines.some((line) => typeof line.obj === 'object' && /Traceback/.test(String((line.obj as { traceback?: string }).traceback))), 'the traceback goes to the log')
  t.notMatch(imported.message, /Traceback/, 'and not to the client')
  const again = await failure(call(kind, 'broken-import', 'verify:score'))
  t.equal(again.code, 'ARB_PLUGIN_IMPORT_FAILED', 'an import error surfaces on every task, never a 0')

  t.equal((await failure(call(kind, 'py-edge', 'verify:nope'))).code, 'ARB_PLUGIN_CALLABLE_NOT_FOUND')
  t.equal((await failure(call(kind, 'py-edge', 'verify:not_callable'))).code, 'ARB_PLUGIN_NOT_CALLABLE')
  t.equal((await failure(call(kind, 'py-edge', 'missing:score'))).code, 'ARB_PLUGIN_MODULE_NOT_FOUND')
  const shadowed = await failure(call(kind, 'py-pkg', 'json:score'))
  t.equal(shadowed.code, 'ARB_PLUGIN_MODULE_NOT_FOUND', 'a module shadowed by the standard library is not silently the wrong one')
  t.match(shadowed.message, /shadowed/)
  const raised = await failure(call(kind, 'py-edge', 'verify:raises'))
  t.equal(raised.code, 'ARB_PLUGIN_RAISED')
  t.equal(raised.message, "'no such thing'")
  t.same(raised.details, { exception: 'KeyError' })
})

t.test('node: the same float() rules', async (t) => {
  const kind = await makeKind(t)
  const reward = async (as: string, value?: unknown): Promise<number> => (await call(kind, 'js-edge', 'verify:returns', { as, value })).reward
  t.equal(await reward('true'), 1, 'true')
  t.equal(await reward('json', false), 0, 'false is 0, as float(False)')
  t.equal(await reward('json', ' 1.5 '), 1.5, '" 1.5 "')
  t.equal(await reward('json', '1_000'), 1000, '"1_000"')
  t.equal(await reward('json', '-.5e1'), -5, 'exponent')
  t.equal(await reward('json', 7), 7)
  t.equal(await reward('bigint'), 3, 'bigint')
  t.equal(await reward('valueof'), 0.5, 'valueOf is JavaScript\'s __float__')
  t.equal(await reward('number_object'), 0.25)

  for (const [as, value, pattern] of [
    ['nan', undefined, /not a finite number \(NaN\)/],
    ['inf', undefined, /not a finite number \(-Infinity\)/],
    ['json', 'nan', /not a finite number/],
    ['json', '-inf', /not a finite number/],
    ['null', undefined, /float\(\) argument must be a string or a real number, not 'null'/],
    ['undefined', undefined, /not 'undefined'/],
    ['json', 'abc', /could not convert string to float/],
    ['json', '1__0', /could not convert string to float/],
    ['json', '_1', /could not convert string to float/],
    ['json', '', /could not convert string to float/],
    ['json', [1], /not 'array'/],
    ['date', undefined, /not 'Date'/],
    ['json', { message: 'no reward' }, /x/],
    ['json', { reward: null }, /reward is not something float\(\) accepts/],
    ['json', { reward: 1, success: 1 }, /success must be a boolean/]
  ] as Array<[string, unknown, RegExp]>) {
    if (as === 'json' && typeof value === 'object' && value !== null && 'message' in value) {
      // A plain object without reward or success is not a result object: float() refuses it.
      const error = await failure(call(kind, 'js-edge', 'verify:returns', { as, value }))
      t.equal(error.code, 'ARB_PLUGIN_BAD_RETURN')
      t.match(error.message, /not 'Object'/)
      continue
    }
    const error = await failure(call(kind, 'js-edge', 'verify:returns', { as, value }))
    t.equal(error.code, 'ARB_PLUGIN_BAD_RETURN', `${as} ${JSON.stringify(value)} is a bad return`)
    t.match(error.message, pattern)
  }
})

t.test('node: result objects, async, lookup failures', async (t) => {
  const kind = await makeKind(t)
  t.match(await call(kind, 'js-edge', 'verify:returns', { as: 'json', value: { reward: 0.7, message: 'close' } }), { reward: 0.7, success: true, message: 'close', output: 'close' })
  t.match(await call(kind, 'js-edge', 'verify:returns', { as: 'verifier_result', value: true }), { reward: 1, success: true, message: 'checked' })
  t.match(await call(kind, 'js-edge', 'verify:returns', { as: 'verifier_result', value: false }), { reward: 0, success: false })
  t.match(await call(kind, 'js-edge', 'verify:returns', { as: 'class_reward' }), { reward: 0.25, message: 'from an object' })
  t.equal((await call(kind, 'js-edge', 'verify:asyncScore')).reward, 0.75, 'a promise is awaited')
  t.equal((await call(kind, 'js-edge', 'verify:returns', { as: 'thenable' })).reward, 0.5, 'any thenable is awaited, as `await` would')
  const rejected = await failure(call(kind, 'js-edge', 'verify:returns', { as: 'rejects' }))
  t.match(rejected, { code: 'ARB_PLUGIN_RAISED', message: 'rejected later', details: { exception: 'RangeError' } }, 'a rejected promise is the callable raising')
  const badThen = await failure(call(kind, 'js-edge', 'verify:returns', { as: 'then_getter_throws' }))
  t.match(badThen, { code: 'ARB_PLUGIN_RAISED', message: 'then getter' }, 'a result whose then getter throws is the callable raising')
  t.equal((await failure(call(kind, 'js-edge', 'verify:nope'))).code, 'ARB_PLUGIN_CALLABLE_NOT_FOUND')
  t.equal((await failure(call(kind, 'js-edge', 'verify:notCallable'))).code, 'ARB_PLUGIN_NOT_CALLABLE')
  const raised = await failure(call(kind, 'js-edge', 'verify:raises'))
  t.equal(raised.code, 'ARB_PLUGIN_RAISED')
  t.equal(raised.message, 'bad things')
  t.same(raised.details, { exception: 'TypeError' })
})

t.test('large tasks and trajectories cross the protocol intact, in both runtimes', async (t) => {
  const kind = await makeKind(t, { workers: 1 })
  const trajectory = Array.from({ length: 2000 }, (_, i) => ({ role: 'assistant', content: `step ${i} ${'é✓'.repeat(500)}` }))
  const task = { reference: 'x'.repeat(300_000) }
  const [a, b] = await Promise.all([
    call(kind, 'py-edge', 'verify:echo', task, trajectory),
    call(kind, 'py-edge', 'verify:echo', { small: true }, 'short')
  ])
  t.same(JSON.parse((a as { message: string }).message), { task, trajectory })
  t.same(JSON.parse((b as { message: string }).message), { task: { small: true }, trajectory: 'short' })
})

t.test('JavaScript: an error that cannot be read fails its call as raised; the worker keeps serving', async (t) => {
  const kind = await makeKind(t, { workers: 1 })
  const raised = await failure(call(kind, 'js-edge', 'verify:raisesUnreadable', {}, '', { timeoutS: 5 }))
  t.equal(raised.code, 'ARB_PLUGIN_RAISED')
  t.match(raised.message, /threw something unreadable/)
  t.equal((await call(kind, 'js-edge', 'verify:one', {}, '', { timeoutS: 5 })).reward, 1, 'the same worker answers the next call')
})

t.test('an exception message is cut for the client (the log keeps the traceback)', async (t) => {
  const kind = await makeKind(t, { workers: 1 })
  const raised = await failure(call(kind, 'js-edge', 'verify:raisesLong'))
  t.equal(raised.code, 'ARB_PLUGIN_RAISED')
  t.equal(raised.message, `${'x'.repeat(2000)}…`)
})
