// Turns the bytes of one rubric file into a Rubric, or throws a RubricFileError whose message is
// the reason an operator reads in /v1/verifiers, in the log and in the 502 of a request naming it.
import { createHash } from 'node:crypto'
import sjson from 'secure-json-parse'
import YAML from 'yaml'
import {
  dimensionProblems, frontMatterValidator, numberCriteria, structuredValidator,
  type Rubric, type StructuredRubric
} from './rubric.js'
import { DEFAULT_PASS_THRESHOLD } from '../../result.js'

export class RubricFileError extends Error {
  constructor (message: string) {
    super(message)
    this.name = 'RubricFileError'
  }
}

export interface RubricFile {
  owner: string
  name: string
  version: number
  extension: 'yaml' | 'yml' | 'json' | 'md'
  path: string
  bytes: Buffer
}

/** The first few schema errors, as `path: message`, for people. */
function schemaReason (errors: Array<{ instancePath: string, message: string, params?: unknown, keyword?: string }>): string {
  const useful = errors.filter((error) => error.keyword !== 'boolean')
  return useful.slice(0, 5).map((error) => {
    const extra = error.keyword === 'additionalProperties'
      ? ` (${((error.params as { additionalProperties?: string[] })?.additionalProperties ?? []).join(', ')})`
      : ''
    return `${error.instancePath === '' ? '/' : error.instancePath}: ${error.message}${extra}`
  }).join('; ')
}

function parseYaml (text: string): unknown {
  const document = YAML.parseDocument(text, { uniqueKeys: true, prettyErrors: false })
  if (document.errors.length > 0) throw new RubricFileError(`YAML: ${document.errors[0].message.split('\n')[0]}`)
  try {
    return document.toJS({ maxAliasCount: 100 })
  } catch (error) {
    throw new RubricFileError(`YAML: ${(error as Error).message}`)
  }
}

function parseJson (text: string): unknown {
  try {
    return sjson.parse(text, null, { protoAction: 'error', constructorAction: 'error' })
  } catch (error) {
    throw new RubricFileError(`JSON: ${(error as Error).message}`)
  }
}

function fromStructured (file: RubricFile, data: unknown, base: Pick<Rubric, 'owner' | 'name' | 'version' | 'ref' | 'contentHash' | 'path'>): Rubric {
  if (!structuredValidator.Check(data)) {
    throw new RubricFileError(`does not match the rubric schema: ${schemaReason(structuredValidator.Errors(data))}`)
  }
  const rubric = data as StructuredRubric
  const dimensions = numberCriteria(rubric.dimensions)
  const problem = dimensionProblems(dimensions)
  if (problem !== undefined) throw new RubricFileError(problem)
  return {
    ...base,
    format: file.extension === 'json' ? 'json' : 'yaml',
    title: rubric.title,
    description: (rubric.description ?? '').trim(),
    passThreshold: rubric.pass_threshold ?? DEFAULT_PASS_THRESHOLD,
    requiresReference: rubric.requires_reference ?? false,
    instructions: (rubric.instructions ?? '').trim(),
    judge: { ...rubric.judge },
    dimensions
  }
}

const OVERALL = 'overall'
const OVERALL_DESCRIPTION = 'How well the trajectory meets the rubric as a whole.'

interface Section { heading: string, lines: string[] }

/**
 * A Markdown rubric is free text. The judge scores one `overall` dimension plus one per `##`
 * heading; bullet items become that section's criteria (top-level bullets belong to `overall`);
 * the first `#` heading is the title. Optional YAML front matter sets the structured fields
 * other than dimensions (pass_threshold, requires_reference, instructions, judge).
 */
function fromMarkdown (text: string, base: Pick<Rubric, 'owner' | 'name' | 'version' | 'ref' | 'contentHash' | 'path'>): Rubric {
  let body = text.replace(/^\uFEFF/, '')
  let front: Record<string, unknown> = {}
  const frontMatch = /^---\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)/.exec(body)
  if (frontMatch !== null) {
    const parsed = parseYaml(frontMatch[1]) ?? {}
    if (!frontMatterValidator.Check(parsed)) {
      throw new RubricFileError(`front matter does not match the schema: ${schemaReason(frontMatterValidator.Errors(parsed))}`)
    }
    front = parsed as Record<string, unknown>
    body = body.slice(frontMatch[0].length)
  }
  if (body.trim() === '') throw new RubricFileError('the Markdown rubric has no text')

  let title: string | undefined
  const preamble: Section = { heading: OVERALL, lines: [] }
  const sections: Section[] = []
  let current = preamble
  let inCode = false
  for (const line of body.split(/\r?\n/)) {
    if (/^\s*(```|~~~)/.test(line)) inCode = !inCode
    const h1 = inCode ? null : /^#\s+(.+?)\s*#*\s*$/.exec(line)
    const h2 = inCode ? null : /^##\s+(.+?)\s*#*\s*$/.exec(line)
    if (h1 !== null && title === undefined && sections.length === 0) { title = h1[1]; continue }
    if (h2 !== null) {
      current = { heading: h2[1], lines: [] }
      sections.push(current)
      continue
    }
    current.lines.push(line)
  }

  const split = (section: Section): { description: string, criteria: string[] } => {
    const criteria: string[] = []
    const prose: string[] = []
    for (const line of section.lines) {
      const bullet = /^\s{0,3}(?:[-*+]|[0-9]+[.)])\s+(.+)$/.exec(line)
      if (bullet !== null) criteria.push(bullet[1].trim())
      else if (line.trim() !== '') prose.push(line.trim())
    }
    return { description: prose.join(' '), criteria }
  }

  const overall = split(preamble)
  const dimensions: Array<{ name: string, description: string, criteria: string[] }> = [
    { name: OVERALL, description: OVERALL_DESCRIPTION, criteria: overall.criteria }
  ]
  for (const section of sections) {
    const { description, criteria } = split(section)
    if (section.heading.toLowerCase() === OVERALL) {
      dimensions[0].criteria.push(...criteria)
      if (description !== '') dimensions[0].description = description
      continue
    }
    dimensions.push({ name: section.heading, description: description === '' ? section.heading : description, criteria })
  }
  const numbered = numberCriteria(dimensions)
  const problem = dimensionProblems(numbered)
  if (problem !== undefined) throw new RubricFileError(problem)
  if (numbered.some((dimension) => dimension.name.length > 100)) throw new RubricFileError('a ## heading is longer than 100 characters')

  return {
    ...base,
    format: 'markdown',
    title: (front.title as string | undefined) ?? title ?? `${base.owner}/${base.name}`,
    description: ((front.description as string | undefined) ?? overall.description).trim(),
    passThreshold: (front.pass_threshold as number | undefined) ?? DEFAULT_PASS_THRESHOLD,
    requiresReference: (front.requires_reference as boolean | undefined) ?? false,
    instructions: ((front.instructions as string | undefined) ?? '').trim(),
    judge: { ...(front.judge as object | undefined) },
    dimensions: numbered,
    text: body.trim()
  }
}

export function contentHash (bytes: Buffer): string {
  return `sha256:${createHash('sha256').update(bytes).digest('hex')}`
}

export function parseRubricFile (file: RubricFile): Rubric {
  let text: string
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(file.bytes)
  } catch {
    throw new RubricFileError('the file is not valid UTF-8')
  }
  const base = {
    owner: file.owner,
    name: file.name,
    version: file.version,
    ref: `${file.owner}/${file.name}@${file.version}`,
    contentHash: contentHash(file.bytes),
    path: file.path
  }
  if (file.extension === 'md') return fromMarkdown(text, base)
  const data = file.extension === 'json' ? parseJson(text) : parseYaml(text)
  return fromStructured(file, data, base)
}
