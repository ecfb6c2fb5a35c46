;; A toolgate-ABI answer policy in WAT: it withholds an answer whose input
;; document holds the member name "ssn" (input.answer.body's names are in
;; lower case, so any case upstream used), redacts /email when it holds
;; "email", and allows every other answer. Input goes at 1024; decisions
;; are constants in a data segment.
(module
  (memory (export "memory") 1)
  (data (i32.const 16) "\"ssn\":")                           ;; 6 bytes
  (data (i32.const 24) "\"email\":")                         ;; 8 bytes
  (data (i32.const 40) "{}")                                 ;; 2 bytes
  (data (i32.const 48) "{\"withhold\":[\"the answer holds a social security number\"]}") ;; 58 bytes
  (data (i32.const 112) "{\"redact\":[\"/email\"]}")        ;; 21 bytes
  (func (export "toolgate_abi_version") (result i32) (i32.const 1))
  ;; toolgate_alloc(len) -> ptr: input always goes at 1024, growing
  ;; memory when it does not fit; 0 when memory cannot grow.
  (func (export "toolgate_alloc") (param $n i32) (result i32)
    (local $need i32)
    (local.set $need (i32.sub
      (i32.shr_u (i32.add (i32.add (local.get $n) (i32.const 1024)) (i32.const 65535)) (i32.const 16))
      (memory.size)))
    (if (i32.gt_s (local.get $need) (i32.const 0))
      (then (if (i32.eq (memory.grow (local.get $need)) (i32.const -1))
        (then (return (i32.const 0))))))
    (i32.const 1024))
  ;; find(p, n, needle, m) -> 1 when the m bytes at needle occur in the n
  ;; bytes at p.
  (func $find (param $p i32) (param $n i32) (param $needle i32) (param $m i32) (result i32)
    (local $i i32) (local $j i32) (local $end i32)
    (local.set $end (i32.sub (i32.add (local.get $p) (local.get $n)) (local.get $m)))
    (local.set $i (local.get $p))
    (block $done
      (loop $scan
        (br_if $done (i32.gt_s (local.get $i) (local.get $end)))
        (local.set $j (i32.const 0))
        (block $miss
          (loop $cmp
            (br_if $miss (i32.ne
              (i32.load8_u (i32.add (local.get $i) (local.get $j)))
              (i32.load8_u (i32.add (local.get $needle) (local.get $j)))))
            (local.set $j (i32.add (local.get $j) (i32.const 1)))
            (br_if $cmp (i32.lt_u (local.get $j) (local.get $m))))
          (return (i32.const 1)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $scan)))
    (i32.const 0))
  ;; toolgate_validate(ptr, len) -> (ptr << 32) | len of the decision.
  (func (export "toolgate_validate") (param $p i32) (param $n i32) (result i64)
    (if (call $find (local.get $p) (local.get $n) (i32.const 16) (i32.const 6))
      (then (return (i64.or (i64.shl (i64.const 48) (i64.const 32)) (i64.const 58)))))
    (if (call $find (local.get $p) (local.get $n) (i32.const 24) (i32.const 8))
      (then (return (i64.or (i64.shl (i64.const 112) (i64.const 32)) (i64.const 21)))))
    (i64.or (i64.shl (i64.const 40) (i64.const 32)) (i64.const 2))))
