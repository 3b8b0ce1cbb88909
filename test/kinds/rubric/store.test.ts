// The rubric store: layout, formats, invalid files reported (never thrown), resolution of refs,
// and the atomic reload behind SIGHUP.
import { cp, mkdir, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { VerificationError } from '../../../src/errors.js'
import { createRubricKind } from '../../../src/kinds/rubric/index.js'
import { parseRubricFile, RubricFileError } from '../../../src/kinds/rubric/parse.js'
import { RubricStore } from '../../../src/kinds/rubric/store.js'
import type { RubricJudgeResult } from '../../../schemas/result.js'
import { answerEvery, captureLog, context, FIXTURES, setup } from './support.js'

const EXAMPLES = fileURLToPath(new URL('../../../examples/rubrics/', import.meta.url))

function code (fn: () => unknown): string | undefined {
  try {
    fn()
    return undefined
  } catch (error) {
    if (error instanceof VerificationError) return error.code
    throw error
  }
}

t.test('the fixture store: valid rubrics, versions and every invalid file with its reason', async (t) => {
  const log = captureLog()
  const store = await RubricStore.open(FIXTURES, log)
  const description = store.describe() as { rubrics: Array<{ ref: string, latest: number, versions: Array<Record<string, unknown>> }>, invalid: Array<{ path: string, reason: string }> }
  const math = description.rubrics.find((rubric) => rubric.ref === 'acme/math')
  t.match(math, { latest: 2, versions: [{ version: 1, format: 'yaml' }, { version: 2, dimensions: ['correctness', 'explanation'], pass_threshold: 0.7 }] })
  t.match(description.rubrics.find((rubric) => rubric.ref === 'acme/latest-broken'), { latest: 2, versions: [{ version: 1, title: 'Good first version' }, { version: 2, invalid: /fewer than 1 items/ }] })
  const reasons = Object.fromEntries(description.invalid.map((entry) => [entry.path, entry.reason]))
  t.match(reasons, {
    'acme/bad-yaml/1.yaml': /^YAML: /,
    'acme/broken/1.yaml': /required properties dimensions.*additional properties \(dimensons\)/,
    'acme/dup/1.json': /version 1 has 2 files/,
    'acme/latest-broken/2.json': /dimensions: must not have fewer than 1 items/,
    'acme/misc/notes.txt': /file name must be <version>/
  })
  t.equal(description.invalid.length, 5)
  t.equal(log.lines.filter((line) => line.level === 'warn').length, 5, 'each invalid file is logged')
  t.equal(store.storeError, undefined)

  t.equal(store.resolve('acme/math').version, 2, 'owner/name is the highest version')
  t.equal(store.resolve('acme/math@1').version, 1)
  t.equal(store.resolve('acme/samples').format, 'yaml', '.yml is YAML')
  t.equal(store.resolve('acme/latest-broken@1').format, 'json')
  t.equal(code(() => store.resolve('acme/latest-broken')), 'ARB_RUBRIC_INVALID', 'the latest version being invalid is an error, not a silent fallback')
  t.equal(code(() => store.resolve('acme/math@3')), 'ARB_RUBRIC_NOT_FOUND')
  t.equal(code(() => store.resolve('acme/nothing')), 'ARB_RUBRIC_NOT_FOUND')
})

t.test('the examples shipped with Arbiter are valid', async (t) => {
  const store = await RubricStore.open(EXAMPLES, captureLog())
  const description = store.describe() as { rubrics: Array<{ ref: string }>, invalid: unknown[] }
  t.same(description.invalid, [])
  t.same(description.rubrics.map((rubric) => rubric.ref), ['alice/arithmetic-correctness', 'alice/helpful-explanation'])
  const structured = store.resolve('alice/arithmetic-correctness')
  t.equal(structured.requiresReference, true)
  t.same(structured.dimensions.map((dimension) => [dimension.name, dimension.weight]), [['correctness', 3], ['working', 1]])
  const markdown = store.resolve('alice/helpful-explanation@1')
  t.same(markdown.dimensions.map((dimension) => dimension.name), ['overall', 'Accuracy', 'Clarity'])
  t.equal(markdown.passThreshold, 0.7)
})

t.test('a store folder that cannot be read: empty, not ready, never a crash', async (t) => {
  const kind = await createRubricKind({
    rubricsDir: join(FIXTURES, 'does-not-exist'),
    judgeBaseUrl: undefined,
    judgeApiKey: undefined,
    judgeModel: undefined,
    judgeTimeoutS: 1,
    judgeConcurrency: 1,
    judgeResponseFormat: 'json_schema',
    judgeMaxChars: 1000,
    judgeCacheSize: 0,
    judgeCacheTtlS: 1,
    log: captureLog()
  })
  t.match(kind.notReadyReason?.(), /cannot be read/)
  t.match(kind.describe(), { error: /cannot be read/, rubrics: [] })
  await t.rejects(kind.verify(context('acme/math', {}, 'x')), { code: 'ARB_RUBRIC_NOT_FOUND', message: /cannot be read/ })
})

t.test('parsing: formats and the reasons files are refused', async (t) => {
  const file = (extension: 'yaml' | 'json' | 'md', text: string | Buffer) => ({ owner: 'o', name: 'n', version: 1, extension, path: `o/n/1.${extension}`, bytes: Buffer.isBuffer(text) ? text : Buffer.from(text) })
  const reason = (extension: 'yaml' | 'json' | 'md', text: string | Buffer): string => {
    try {
      parseRubricFile(file(extension, text))
      return 'parsed'
    } catch (error) {
      t.ok(error instanceof RubricFileError)
      return (error as Error).message
    }
  }
  t.match(reason('json', '{"title": "x", "dimensions": [{"name": "a", "description": "d"}], "__proto__": {"x": 1}}'), /^JSON: /, 'prototype poisoning is refused')
  t.match(reason('json', '{"title": "x"'), /^JSON: /)
  t.match(reason('yaml', 'title: x\ntitle: y\ndimensions: []'), /^YAML: /, 'duplicate keys')
  t.match(reason('yaml', 'title: x\ndimensions:\n  - {name: a, description: d}\n  - {name: a, description: e}'), /dimension "a" appears twice/)
  t.match(reason('yaml', 'title: x\ndimensions:\n  - {name: a, description: d, weight: 0}'), /weight above 0/)
  t.match(reason('yaml', 'title: x\ndimensions:\n  - {name: a, description: d, weight: -1}'), /weight: must be >= 0/)
  t.match(reason('yaml', 'title: x\ndimensions:\n  - {name: a, description: d, weight: 1e308}\n  - {name: b, description: e, weight: 1e308}'), /weights add up to more than a number can hold/, 'never a score of 0 from an overflowing weight sum')
  t.match(reason('yaml', 'title: x\npass_threshold: 2\ndimensions:\n  - {name: a, description: d}'), /pass_threshold: must be <= 1/)
  t.match(reason('yaml', 'title: x\njudge: {samples: 0}\ndimensions:\n  - {name: a, description: d}'), /samples: must be >= 1/)
  t.match(reason('yaml', 'a: &a [*a]\n'), /^YAML|schema/)
  t.match(reason('yaml', Buffer.from([0x74, 0x3a, 0xff, 0xfe])), /not valid UTF-8/)
  t.match(reason('md', '   \n'), /no text/)
  t.match(reason('md', '---\nsamples: 3\n---\n# T\n'), /front matter does not match the schema.*samples/)
  t.match(reason('md', `## ${'h'.repeat(101)}\n`), /longer than 100/)
  t.match(reason('md', '## A\n## A\n'), /appears twice/)

  const markdown = parseRubricFile(file('md', '---\ntitle: Front title\njudge: {samples: 2}\n---\nFree text only.\n\n```\n## not a heading\n```\n\n## Overall\n\nA custom overall.\n\n- counts for overall\n'))
  t.equal(markdown.title, 'Front title')
  t.same(markdown.judge, { samples: 2 })
  t.same(markdown.dimensions.map((dimension) => dimension.name), ['overall'], 'a ## inside a code fence is text; ## Overall merges')
  t.equal(markdown.dimensions[0].description, 'A custom overall.')
  t.same(markdown.dimensions[0].criteria, [{ id: 'C1', text: 'counts for overall' }])
  const untitled = parseRubricFile(file('md', 'Be kind.'))
  t.equal(untitled.title, 'o/n', 'no title: the ref names it')
})

t.test('reload (SIGHUP): atomic swap, refused while a new file is invalid', async (t) => {
  const dir = t.testdir({})
  await cp(join(FIXTURES, 'acme', 'math'), join(dir, 'acme', 'math'), { recursive: true })
  const { kind, log } = await setup(t, (request) => ({ content: answerEvery(request) }), { rubricsDir: dir })
  const resolveVersion = async (ref: string): Promise<number> => ((await kind.verify(context(ref, {}, 'x'))) as RubricJudgeResult).verifier.version as number

  t.equal(await resolveVersion('acme/math'), 2)

  // A new version appears: it serves after reload, not before.
  await writeFile(join(dir, 'acme', 'math', '3.yaml'), 'title: v3\ndimensions:\n  - {name: correctness, description: c}\n  - {name: explanation, description: e}\n  - {name: clarity, description: k}\n')
  t.equal(await resolveVersion('acme/math'), 2, 'no change without a reload')
  await kind.reload?.()
  t.equal(await resolveVersion('acme/math'), 3)
  t.match(kind.describe(), { last_reload: { ok: true } })

  // A half-written file: the reload is refused whole, and the previous tree keeps serving.
  await writeFile(join(dir, 'acme', 'math', '4.yaml'), 'title: v4\ndimensions:\n  - {name: correctness, descr')
  await mkdir(join(dir, 'acme', 'new-one'), { recursive: true })
  await writeFile(join(dir, 'acme', 'new-one', '1.yaml'), 'title: new\ndimensions: [{name: a, description: a}]\n')
  await kind.reload?.()
  t.equal(await resolveVersion('acme/math'), 3, 'version 3 still serves')
  await t.rejects(kind.verify(context('acme/new-one', {}, 'x')), { code: 'ARB_RUBRIC_NOT_FOUND' }, 'nothing of the refused tree serves')
  t.match(kind.describe(), { last_reload: { ok: false, reason: /acme\/math\/4.yaml: YAML/ }, invalid: [] })
  t.ok(log.lines.some((line) => line.level === 'error' && /reload refused/.test(line.msg ?? '')), 'the refusal is logged')

  // Fixed: the whole new tree serves at once.
  await writeFile(join(dir, 'acme', 'math', '4.yaml'), 'title: v4\ndimensions:\n  - {name: correctness, description: c}\n  - {name: explanation, description: e}\n')
  await kind.reload?.()
  t.equal(await resolveVersion('acme/math'), 4)
  t.equal(await resolveVersion('acme/new-one'), 1)

  // A removed rubric is gone after reload.
  await rm(join(dir, 'acme', 'new-one'), { recursive: true })
  await kind.reload?.()
  await t.rejects(kind.verify(context('acme/new-one', {}, 'x')), { code: 'ARB_RUBRIC_NOT_FOUND' })

  // The store folder vanishing is refused too.
  await rm(dir, { recursive: true })
  await kind.reload?.()
  t.match(kind.describe(), { last_reload: { ok: false, reason: /cannot be read/ } })
  t.equal(await resolveVersion('acme/math'), 4, 'the last good tree still serves')
})

t.test('reload: a file that was already invalid does not block other changes', async (t) => {
  const dir = t.testdir({
    acme: {
      broken: { '1.yaml': 'title: [' },
      ok: { '1.yaml': 'title: ok\ndimensions: [{name: a, description: a}]\n' }
    }
  })
  const store = await RubricStore.open(dir, captureLog())
  t.equal(store.snapshot.invalid.length, 1)
  await writeFile(join(dir, 'acme', 'ok', '2.yaml'), 'title: ok2\ndimensions: [{name: a, description: a}]\n')
  await Promise.all([store.reload(), store.reload()])
  t.equal(store.resolve('acme/ok').version, 2)
  t.equal(store.lastReload?.ok, true)
  t.equal(code(() => store.resolve('acme/broken')), 'ARB_RUBRIC_INVALID')
})

t.test('a store that could not be read at start is replaced by the first readable tree', async (t) => {
  const dir = join(t.testdir({}), 'later')
  const store = await RubricStore.open(dir, captureLog())
  t.ok(store.storeError)
  await mkdir(join(dir, 'acme', 'x'), { recursive: true })
  await writeFile(join(dir, 'acme', 'x', '1.md'), '# X\n')
  await writeFile(join(dir, 'acme', 'x', '2.md'), '')
  await store.reload()
  t.equal(store.storeError, undefined)
  t.equal(store.resolve('acme/x@1').title, 'X')
  t.equal(code(() => store.resolve('acme/x')), 'ARB_RUBRIC_INVALID')
})
