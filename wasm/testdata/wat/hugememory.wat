;; Refused at load: it declares a 32 MiB minimum memory, above the default
;; 16 MiB limit.
(module
  (memory (export "memory") 512)
  (func (export "toolgate_abi_version") (result i32) (i32.const 1))
  (func (export "toolgate_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "toolgate_validate") (param i32 i32) (result i64) (i64.const 0)))
