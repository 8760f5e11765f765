// Validates request and response bodies against the official Remnawave API
// contract (@remnawave/backend-contract, pinned in package.json here).
//
// stdin:  a JSON list of checks, each one of
//   {"command": "CreateUserCommand", "kind": "request",  "body": {...}}   RequestBodySchema (or RequestSchema)
//   {"command": "CreateUserCommand", "kind": "response", "body": {...}}   ResponseSchema
//   {"command": "EnableUserCommand", "kind": "params",   "body": {...}}   RequestParamSchema
//   {"command": "EnableUserCommand", "kind": "route", "method": "POST", "path": "/api/users/5/actions/enable",
//    "args": ["5"]}                                                        endpoint method and url(...args)
// stdout: {"contractVersion": "...", "results": [{"index", "command", "kind", "ok", "issues"?, "error"?}]}
// Exit status 0 whenever every check could be run (each result says ok or not), 2 on bad input.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';

const require = createRequire(import.meta.url);
const contract = require('@remnawave/backend-contract');
const contractVersion = require('@remnawave/backend-contract/package.json').version;

const SCHEMA_BY_KIND = {
    request: ['RequestBodySchema', 'RequestSchema'],
    response: ['ResponseSchema'],
    params: ['RequestParamSchema'],
};

// Express (under NestJS) routes /api/users and /api/users/ alike.
const trimSlash = (path) => (path.length > 1 ? path.replace(/\/+$/, '') : path);

function check(item, index) {
    const base = { index, command: item.command, kind: item.kind };
    const command = contract[item.command];
    if (!command) return { ...base, ok: false, error: `no such command in the contract: ${item.command}` };

    if (item.kind === 'route') {
        const url = typeof command.url === 'function' ? command.url(...(item.args || [])) : command.url;
        const method = command.endpointDetails?.REQUEST_METHOD?.toUpperCase();
        const problems = [];
        if (trimSlash(url) !== trimSlash(item.path)) problems.push(`path ${item.path} is not the contract's ${url}`);
        if (method !== String(item.method).toUpperCase()) problems.push(`method ${item.method} is not ${method}`);
        return { ...base, ok: problems.length === 0, ...(problems.length ? { error: problems.join('; ') } : {}) };
    }

    const names = SCHEMA_BY_KIND[item.kind];
    if (!names) return { ...base, ok: false, error: `unknown kind ${item.kind}` };
    const name = names.find((candidate) => command[candidate]);
    if (!name) return { ...base, ok: false, error: `the contract has no ${names.join('/')} for ${item.command}` };

    const result = command[name].safeParse(item.body);
    if (result.success) return { ...base, ok: true, schema: name };
    return {
        ...base,
        ok: false,
        schema: name,
        issues: result.error.issues.map((issue) => ({ path: issue.path, code: issue.code, message: issue.message })),
    };
}

let items;
try {
    items = JSON.parse(readFileSync(0, 'utf8'));
    if (!Array.isArray(items)) throw new Error('expected a JSON list');
} catch (error) {
    process.stderr.write(`validate.mjs: bad input: ${error.message}\n`);
    process.exit(2);
}
process.stdout.write(JSON.stringify({ contractVersion, results: items.map(check) }) + '\n');
