// Runs each job protocol of protocol_cases.yaml through the real rest server's protocol middleware
// (microsoft/pai src/rest-server/src/middlewares/v2/protocol.js and config/v2/protocol.js) and prints what the
// rest server answers: {status, body} of the error, or the rendered entrypoint of each task role.
//
//   node regenerate.js <pai checkout> protocol_cases.yaml > protocol_expected.json
//
// NODE_PATH must reach ajv@6.12.6, ajv-merge-patch@4.1.0, js-yaml@3.14.1 and mustache@2.3.2 (the versions the
// rest server's package.json allows).
'use strict';
const fs = require('fs');
const path = require('path');
const Module = require('module');
const yaml = require('js-yaml');

const [paiRoot, casesFile] = process.argv.slice(2);
const src = path.join(paiRoot, 'src/rest-server/src');

function load(file, replace) {
  let code = fs.readFileSync(path.join(src, file), 'utf8');
  for (const [from, to] of replace) code = code.split(from).join(to);
  const mod = new Module(file, module);
  mod.paths = Module._nodeModulePaths(process.cwd()).concat((process.env.NODE_PATH || '').split(':'));
  mod._compile(code, file);
  return mod.exports;
}

// createError as utils/error.js builds it: an http error whose status and code reach express's error handler
function createError(status, code, message) {
  const statuses = { 'Bad Request': 400, Forbidden: 403, 'Not Found': 404, Conflict: 409 };
  if (typeof message === 'object') message = 'message' in message ? message.message : JSON.stringify(message);
  const error = new Error(message);
  error.status = statuses[status] || status;
  error.code = code;
  return error;
}
global.__createError = createError;

const schema = load('config/v2/protocol.js', []);
global.__schema = schema;
const middleware = load('middlewares/v2/protocol.js', [
  ["require('@pai/utils/error')", 'global.__createError'],
  ["require('@pai/middlewares/v2/hived')", '{}'],
  ["require('@pai/config/launcher')", '{ enabledHived: false }'],
  ["require('@pai/config/v2/protocol')", 'global.__schema'],
  ["require('@pai/middlewares/v2/asyncHandler')", '((f) => f)'],
]);

const out = [];
for (const item of yaml.safeLoad(fs.readFileSync(casesFile, 'utf8'))) {
  try {
    const protocol = middleware.render(middleware.validate(item.body));
    const entrypoints = {};
    for (const role of Object.keys(protocol.taskRoles)) entrypoints[role] = protocol.taskRoles[role].entrypoint;
    out.push({ title: item.title, entrypoints });
  } catch (error) {
    // express's error handler: the error's status (500 when it has none), its code when it has one
    out.push({ title: item.title, status: error.status || 500, body: { code: error.code, message: error.message } });
  }
}
console.log(JSON.stringify(out, null, 1));
