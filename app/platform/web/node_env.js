// kvscope-node.js: the CLI sees the KVSCOPE_* variables of node's environment
// (Emscripten's getenv starts from a fixed set), e.g. KVSCOPE_THREADS=1.
// (ES5: Emscripten 3.1.6's JS optimiser parses no newer syntax here.)
Module['preRun'] = (Module['preRun'] || []).concat([function () {
  Object.keys(process.env).forEach(function (k) {
    if (k.indexOf('KVSCOPE_') === 0) ENV[k] = process.env[k];
  });
}]);
