;; Hostile: toolgate_validate returns bytes that are not a decision.
(module
  (memory (export "memory") 1)
  (data (i32.const 16) "\00\ffnot a decision{")
  (func (export "toolgate_abi_version") (result i32) (i32.const 1))
  (func (export "toolgate_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "toolgate_validate") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 17))))
