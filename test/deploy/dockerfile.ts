// Reads the Dockerfile and .dockerignore for the deploy tests (the image cannot be built here).
// Small on purpose: instructions, stages, ENV, COPY, exec form and .dockerignore matching.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const ROOT = fileURLToPath(new URL('../../', import.meta.url))

export interface Instruction { op: string, args: string, line: number }
export interface Stage { name: string, base: string, instructions: Instruction[] }

/** Dockerfile → instructions (continuations joined, comments and parser directives dropped). */
export function parseDockerfile (text: string): Instruction[] {
  const out: Instruction[] = []
  let pending = ''
  let start = 0
  text.split('\n').forEach((raw, index) => {
    const line = raw.trimEnd()
    if (pending === '' && /^\s*(#.*)?$/.test(line)) return
    if (pending !== '' && /^\s*#/.test(line)) return // comments inside a continuation
    if (pending === '') start = index + 1
    if (line.endsWith('\\')) {
      pending += line.slice(0, -1) + ' '
      return
    }
    const full = (pending + line).trim()
    pending = ''
    const match = /^([A-Za-z]+)\s+(.*)$/s.exec(full)
    if (match !== null) out.push({ op: match[1].toUpperCase(), args: match[2].trim(), line: start })
  })
  return out
}

export function stagesOf (instructions: Instruction[]): { args: Map<string, string>, stages: Stage[] } {
  const args = new Map<string, string>()
  const stages: Stage[] = []
  for (const instruction of instructions) {
    if (instruction.op === 'FROM') {
      const [base, as, name] = instruction.args.split(/\s+/)
      stages.push({ base, name: as?.toUpperCase() === 'AS' ? name : String(stages.length), instructions: [] })
    } else if (stages.length === 0) {
      if (instruction.op === 'ARG') {
        const [key, value] = instruction.args.split('=')
        args.set(key, value ?? '')
      }
    } else {
      stages[stages.length - 1].instructions.push(instruction)
    }
  }
  return { args, stages }
}

/** `ENV A=1 B=2` (or the legacy `ENV A 1`) → entries. */
export function envOf (stage: Stage): Map<string, string> {
  const env = new Map<string, string>()
  for (const { args } of stage.instructions.filter((i) => i.op === 'ENV')) {
    if (!args.includes('=')) {
      const [key, ...rest] = args.split(/\s+/)
      env.set(key, rest.join(' '))
      continue
    }
    for (const pair of args.match(/[A-Za-z_][A-Za-z0-9_]*=("[^"]*"|\S*)/g) ?? []) {
      const at = pair.indexOf('=')
      env.set(pair.slice(0, at), pair.slice(at + 1).replace(/^"|"$/g, ''))
    }
  }
  return env
}

export interface Copy { from?: string, sources: string[], dest: string, line: number }

export function copiesOf (stage: Stage): Copy[] {
  return stage.instructions.filter((i) => i.op === 'COPY').map((instruction) => {
    const words = instruction.args.split(/\s+/)
    const flags = words.filter((word) => word.startsWith('--'))
    const paths = words.filter((word) => !word.startsWith('--'))
    const from = flags.find((flag) => flag.startsWith('--from='))?.slice('--from='.length)
    return { ...(from === undefined ? {} : { from }), sources: paths.slice(0, -1), dest: paths[paths.length - 1], line: instruction.line }
  })
}

export function execForm (instruction: Instruction | undefined): string[] | undefined {
  if (instruction === undefined) return undefined
  const json = instruction.args.replace(/^(--[a-z-]+=\S+\s+)*CMD\s+/i, '')
  try {
    const parsed = JSON.parse(json) as unknown
    return Array.isArray(parsed) && parsed.every((part) => typeof part === 'string') ? parsed : undefined
  } catch {
    return undefined
  }
}

/** .dockerignore patterns (Go filepath.Match plus `**`), applied to a path and each of its parents. */
export function ignoredBy (patterns: string[], path: string): string | undefined {
  const toRegExp = (pattern: string): RegExp => new RegExp('^' + pattern.replace(/^\/+/, '').replace(/\/+$/, '').split('/').map((part) =>
    part === '**' ? '.*' : part.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*').replace(/\?/g, '[^/]')
  ).join('/').replace(/\.\*\//g, '(?:.*/)?') + '$')
  const parts = path.split('/')
  let verdict: string | undefined
  for (const raw of patterns) {
    const negated = raw.startsWith('!')
    const pattern = negated ? raw.slice(1) : raw
    const regexp = toRegExp(pattern)
    const hit = parts.some((_, index) => regexp.test(parts.slice(0, index + 1).join('/')))
    if (hit) verdict = negated ? undefined : raw
  }
  return verdict
}

/** The repository's own Dockerfile, parsed. */
export function readDockerfile (): { args: Map<string, string>, stages: Stage[], final: Stage, instructions: Instruction[] } {
  const instructions = parseDockerfile(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'))
  const { args, stages } = stagesOf(instructions)
  return { args, stages, final: stages[stages.length - 1], instructions }
}

export function readDockerignore (): string[] {
  return readFileSync(join(ROOT, '.dockerignore'), 'utf8').split('\n').map((line) => line.trim()).filter((line) => line !== '' && !line.startsWith('#'))
}
