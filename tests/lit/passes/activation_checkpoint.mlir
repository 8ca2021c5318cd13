// activation-checkpoint: saved activations are recomputed by clones of their forward ops
// (phase = "recompute", same node) inserted before their first backward use; the backward ops
// read the clones, forward ops keep their uses; dropout and the loss op are always stored.
// RUN: monet-opt %s --split-input-file -p 'activation-checkpoint' | filecheck %s --check-prefixes=CHECK,STORE
// RUN: monet-opt %s --split-input-file -p 'activation-checkpoint{policy=store-all},activation-checkpoint' | filecheck %s --check-prefixes=CHECK,STORE
// RUN: monet-opt %s --split-input-file -p 'activation-checkpoint{policy=recompute-all}' | filecheck %s --check-prefixes=CHECK,ALL
// RUN: monet-opt %s --split-input-file -p 'activation-checkpoint{policy=recompute-all},activation-checkpoint' | filecheck %s --check-prefixes=CHECK,ALL
// RUN: monet-opt %s --split-input-file -p 'activation-checkpoint{policy=sqrt}' | filecheck %s --check-prefixes=CHECK,SQRT
// RUN: monet-opt %s --split-input-file -p 'activation-checkpoint{policy=memory-budget budget=700}' | filecheck %s --check-prefixes=CHECK,B700
// RUN: monet-opt %s --split-input-file -p 'activation-checkpoint{policy="memory-budget=400B"}' | filecheck %s --check-prefixes=CHECK,B400
// RUN: monet-opt %s --split-input-file -p 'activation-checkpoint{policy=list recompute="/relu1/Relu","/sig/Sigmoid"}' | filecheck %s --check-prefixes=CHECK,LIST
// RUN: monet-opt %s --split-input-file -p 'activation-checkpoint{policy="list=/relu1/Relu /sig/Sigmoid"}' | filecheck %s --check-prefixes=CHECK,LIST
// RUN: monet-opt %s --split-input-file -p 'activation-checkpoint{policy=recompute-all},insert-optimizer{kind=sgd}' | filecheck %s --check-prefix=OPT
// RUN: monet-opt %s --split-input-file -p 'insert-optimizer{kind=sgd},activation-checkpoint{policy=recompute-all}' | filecheck %s --check-prefix=OPT
// RUN: not monet-opt %s -p 'activation-checkpoint{policy=fancy}' 2>&1 | filecheck %s --check-prefix=UNKNOWN
// RUN: not monet-opt %s -p 'activation-checkpoint{policy=memory-budget budget=300}' 2>&1 | filecheck %s --check-prefix=UNREACHABLE
// RUN: not monet-opt %s -p 'activation-checkpoint{policy=list recompute="/nope/Relu"}' 2>&1 | filecheck %s --check-prefix=NONODE
// RUN: not monet-opt %s -p 'activation-checkpoint{policy=list recompute="/drop/Dropout"}' 2>&1 | filecheck %s --check-prefix=RANDOM
// RUN: not monet-opt %s -p 'activation-checkpoint{policy=recompute-all},activation-checkpoint{policy=sqrt}' 2>&1 | filecheck %s --check-prefix=TWICE
// A plan: keep, recompute or page per node; paged storages are marked on their producer.
// RUN: echo '{"activations": {"/relu1/Relu": "page", "/drop/Dropout": "page", "/sig/Sigmoid": "recompute", "/fc1/Gemm": "keep"}}' > %t.json
// RUN: monet-opt %s -p 'activation-checkpoint{policy="plan=%t.json"}' | filecheck %s --check-prefix=PLAN
// RUN: not monet-opt %s -p 'activation-checkpoint{policy="plan=%t.json"},activation-checkpoint{policy="plan=%t.json"}' 2>&1 | filecheck %s --check-prefix=PLANTWICE
// RUN: echo '{"activations": {"/fc3/Gemm": "page"}}' > %t.bad.json
// RUN: not monet-opt %s -p 'activation-checkpoint{policy="plan=%t.bad.json"}' 2>&1 | filecheck %s --check-prefix=PLANBAD
// PLAN:        %r1 = nn.relu %h1 {monet.page = array<i64: 0>, monet.saved, node = "/relu1/Relu"}
// PLAN:        %y, %mask = nn.dropout %t2 {monet.page = array<i64: 1>, monet.saved,
// PLAN:        %s_rc = nn.sigmoid %y {node = "/sig/Sigmoid", phase = "recompute"}
// PLANTWICE:   monet-opt: error: activation-checkpoint: the function already pages saved activations (nn.relu, node '/relu1/Relu')
// PLANBAD:     monet-opt: error: activation-checkpoint{policy=plan={{.*}}.bad.json}: {{.*}}.bad.json: no result of node '/fc3/Gemm' is a saved activation: there is nothing to page

// UNKNOWN:     monet-opt: error: activation-checkpoint: unknown policy 'fancy' (expected store-all, recompute-all, sqrt, memory-budget=BYTES, list=NODE,NODE,... or plan=FILE.json)
// UNREACHABLE: monet-opt: error: activation-checkpoint{policy=memory-budget}: the memory budget of 300 bytes cannot be met: recomputing every recomputable activation still saves 368 bytes
// NONODE:      monet-opt: error: activation-checkpoint{policy=list}: no forward op has node '/nope/Relu'
// RANDOM:      monet-opt: error: activation-checkpoint{policy=list}: node '/drop/Dropout' (nn.dropout) has random results: they are always stored, not recomputed
// TWICE:       monet-opt: error: activation-checkpoint: the function already has recompute ops (nn.sigmoid, node '/sig/Sigmoid'); checkpointing is applied once

// A step as autodiff produces it. Saved: %r1, %t2, %s (recomputable, 256 bytes each), the
// dropout mask (64 bytes, random) and the log-probabilities (48 bytes, loss op): 880 bytes.

func.func @step(%x: tensor<4x8xf32> {monet.input = "x"},
                %w1: tensor<16x8xf32> {monet.param = "fc1.weight", monet.trainable},
                %w2: tensor<16x16xf32> {monet.param = "fc2.weight", monet.trainable},
                %w3: tensor<3x16xf32> {monet.param = "fc3.weight", monet.trainable},
                %labels: tensor<4xi64> {monet.input = "labels"})
    -> (tensor<f32> {monet.loss}, tensor<16x8xf32> {monet.grad = "fc1.weight"}, tensor<16x16xf32> {monet.grad = "fc2.weight"}, tensor<3x16xf32> {monet.grad = "fc3.weight"}) {
  %h1 = nn.gemm %x, %w1 {trans_b = true, node = "/fc1/Gemm"} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %r1 = nn.relu %h1 {node = "/relu1/Relu"} : tensor<4x16xf32>
  %h2 = nn.gemm %r1, %w2 {trans_b = true, node = "/fc2/Gemm"} : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
  %t2 = nn.tanh %h2 {node = "/tanh2/Tanh"} : tensor<4x16xf32>
  %y, %mask = nn.dropout %t2 {ratio = 2.500000e-01 : f64, node = "/drop/Dropout"} : (tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xi1>)
  %s = nn.sigmoid %y {node = "/sig/Sigmoid"} : tensor<4x16xf32>
  %o = nn.gemm %s, %w3 {trans_b = true, node = "/fc3/Gemm"} : (tensor<4x16xf32>, tensor<3x16xf32>) -> tensor<4x3xf32>
  %loss, %log_prob = nn.softmax_cross_entropy %o, %labels {reduction = "mean", node = "loss"} : (tensor<4x3xf32>, tensor<4xi64>)
    -> (tensor<f32>, tensor<4x3xf32>)
  %d_loss = nn.constant dense<1.000000e+00> : tensor<f32> {node = "loss", phase = "backward"}
  %d_o = grad.softmax_cross_entropy %d_loss, %log_prob, %labels {reduction = "mean", node = "loss"} : (tensor<f32>, tensor<4x3xf32>, tensor<4xi64>) -> tensor<4x3xf32>
  %d_s = grad.matmul_lhs %d_o, %w3 {trans_b = true, node = "/fc3/Gemm"} : (tensor<4x3xf32>, tensor<3x16xf32>) -> tensor<4x16xf32>
  %d_w3 = grad.matmul_rhs %d_o, %s {trans_b = true, node = "/fc3/Gemm"} : (tensor<4x3xf32>, tensor<4x16xf32>) -> tensor<3x16xf32>
  %d_y = grad.sigmoid %d_s, %s {node = "/sig/Sigmoid"} : tensor<4x16xf32>
  %d_t2 = grad.dropout %d_y, %mask {ratio = 2.500000e-01 : f64, node = "/drop/Dropout"} : (tensor<4x16xf32>, tensor<4x16xi1>) -> tensor<4x16xf32>
  %d_h2 = grad.tanh %d_t2, %t2 {node = "/tanh2/Tanh"} : tensor<4x16xf32>
  %d_r1 = grad.matmul_lhs %d_h2, %w2 {trans_b = true, node = "/fc2/Gemm"} : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
  %d_w2 = grad.matmul_rhs %d_h2, %r1 {trans_b = true, node = "/fc2/Gemm"} : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<16x16xf32>
  %d_h1 = grad.relu %d_r1, %r1 {node = "/relu1/Relu"} : tensor<4x16xf32>
  %d_w1 = grad.matmul_rhs %d_h1, %x {trans_b = true, node = "/fc1/Gemm"} : (tensor<4x16xf32>, tensor<4x8xf32>) -> tensor<16x8xf32>
  func.return %loss, %d_w1, %d_w2, %d_w3 : tensor<f32>, tensor<16x8xf32>, tensor<16x16xf32>, tensor<3x16xf32>
}

// CHECK-LABEL: func.func @step
// Forward ops are never changed; monet.saved marks what stays saved.
// CHECK:         %h1 = nn.gemm %x, %w1 {trans_b = true, node = "/fc1/Gemm"}
// STORE-NEXT:    %r1 = nn.relu %h1 {monet.saved, node = "/relu1/Relu"}
// ALL-NEXT:      %r1 = nn.relu %h1 {node = "/relu1/Relu"}
// SQRT-NEXT:     %r1 = nn.relu %h1 {node = "/relu1/Relu"}
// B700-NEXT:     %r1 = nn.relu %h1 {node = "/relu1/Relu"}
// B400-NEXT:     %r1 = nn.relu %h1 {node = "/relu1/Relu"}
// LIST-NEXT:     %r1 = nn.relu %h1 {node = "/relu1/Relu"}
// CHECK-NEXT:    %h2 = nn.gemm %r1, %w2
// STORE-NEXT:    %t2 = nn.tanh %h2 {monet.saved, node = "/tanh2/Tanh"}
// ALL-NEXT:      %t2 = nn.tanh %h2 {node = "/tanh2/Tanh"}
// SQRT-NEXT:     %t2 = nn.tanh %h2 {monet.saved, node = "/tanh2/Tanh"}
// B700-NEXT:     %t2 = nn.tanh %h2 {monet.saved, node = "/tanh2/Tanh"}
// B400-NEXT:     %t2 = nn.tanh %h2 {node = "/tanh2/Tanh"}
// LIST-NEXT:     %t2 = nn.tanh %h2 {monet.saved, node = "/tanh2/Tanh"}
// CHECK-NEXT:    %y, %mask = nn.dropout %t2 {monet.saved,
// STORE-NEXT:    %s = nn.sigmoid %y {monet.saved, node = "/sig/Sigmoid"}
// ALL-NEXT:      %s = nn.sigmoid %y {node = "/sig/Sigmoid"}
// SQRT-NEXT:     %s = nn.sigmoid %y {node = "/sig/Sigmoid"}
// B700-NEXT:     %s = nn.sigmoid %y {monet.saved, node = "/sig/Sigmoid"}
// B400-NEXT:     %s = nn.sigmoid %y {monet.saved, node = "/sig/Sigmoid"}
// LIST-NEXT:     %s = nn.sigmoid %y {node = "/sig/Sigmoid"}
// CHECK-NEXT:    %o = nn.gemm %s, %w3
// CHECK-NEXT:    %loss, %log_prob = nn.softmax_cross_entropy %o, %labels {monet.saved,
// CHECK-NEXT:    %d_loss = nn.constant
// CHECK-NEXT:    %d_o = grad.softmax_cross_entropy %d_loss, %log_prob, %labels
// CHECK-NEXT:    %d_s = grad.matmul_lhs %d_o, %w3

// The sigmoid is recomputed from the stored dropout result (which becomes saved), before its
// first backward reader; both readers use the copy.
// STORE-NEXT:    %d_w3 = grad.matmul_rhs %d_o, %s {
// STORE-NEXT:    %d_y = grad.sigmoid %d_s, %s {
// ALL-NEXT:      %s_rc = nn.sigmoid %y {node = "/sig/Sigmoid", phase = "recompute"} : tensor<4x16xf32>
// ALL-NEXT:      %d_w3 = grad.matmul_rhs %d_o, %s_rc {
// ALL-NEXT:      %d_y = grad.sigmoid %d_s, %s_rc {
// SQRT-NEXT:     %s_rc = nn.sigmoid %y {node = "/sig/Sigmoid", phase = "recompute"}
// SQRT-NEXT:     %d_w3 = grad.matmul_rhs %d_o, %s_rc {
// SQRT-NEXT:     %d_y = grad.sigmoid %d_s, %s_rc {
// LIST-NEXT:     %s_rc = nn.sigmoid %y {node = "/sig/Sigmoid", phase = "recompute"}
// LIST-NEXT:     %d_w3 = grad.matmul_rhs %d_o, %s_rc {
// LIST-NEXT:     %d_y = grad.sigmoid %d_s, %s_rc {
// B700-NEXT:     %d_w3 = grad.matmul_rhs %d_o, %s {
// B700-NEXT:     %d_y = grad.sigmoid %d_s, %s {
// B400-NEXT:     %d_w3 = grad.matmul_rhs %d_o, %s {
// B400-NEXT:     %d_y = grad.sigmoid %d_s, %s {
// CHECK-NEXT:    %d_t2 = grad.dropout %d_y, %mask

// recompute-all: %r1 and %t2 are one segment (no kept value between them): the chain from the
// inputs is cloned once, before the first reader, and %r1_rc serves the later readers.
// ALL-NEXT:      %h1_rc = nn.gemm %x, %w1 {trans_b = true, node = "/fc1/Gemm", phase = "recompute"} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
// ALL-NEXT:      %r1_rc = nn.relu %h1_rc {node = "/relu1/Relu", phase = "recompute"} : tensor<4x16xf32>
// ALL-NEXT:      %h2_rc = nn.gemm %r1_rc, %w2 {trans_b = true, node = "/fc2/Gemm", phase = "recompute"}
// ALL-NEXT:      %t2_rc = nn.tanh %h2_rc {node = "/tanh2/Tanh", phase = "recompute"}
// ALL-NEXT:      %d_h2 = grad.tanh %d_t2, %t2_rc
// ALL-NEXT:      %d_r1 = grad.matmul_lhs %d_h2, %w2
// ALL-NEXT:      %d_w2 = grad.matmul_rhs %d_h2, %r1_rc {
// ALL-NEXT:      %d_h1 = grad.relu %d_r1, %r1_rc {
// B400-NEXT:     %h1_rc = nn.gemm %x, %w1 {trans_b = true, node = "/fc1/Gemm", phase = "recompute"}
// B400-NEXT:     %r1_rc = nn.relu %h1_rc {node = "/relu1/Relu", phase = "recompute"}
// B400-NEXT:     %h2_rc = nn.gemm %r1_rc, %w2 {trans_b = true, node = "/fc2/Gemm", phase = "recompute"}
// B400-NEXT:     %t2_rc = nn.tanh %h2_rc {node = "/tanh2/Tanh", phase = "recompute"}
// B400-NEXT:     %d_h2 = grad.tanh %d_t2, %t2_rc
// B400-NEXT:     %d_r1 = grad.matmul_lhs %d_h2, %w2
// B400-NEXT:     %d_w2 = grad.matmul_rhs %d_h2, %r1_rc {
// B400-NEXT:     %d_h1 = grad.relu %d_r1, %r1_rc {

// sqrt (3 candidates, a checkpoint every 2, at a cut): %t2 is kept, %r1 recomputed; a budget of
// 700 bytes recomputes the cheapest per byte, %r1 (the sigmoid would free nothing: its
// recomputation needs the dropout result saved instead); list recomputes what it names.
// STORE-NEXT:    %d_h2 = grad.tanh %d_t2, %t2 {
// SQRT-NEXT:     %d_h2 = grad.tanh %d_t2, %t2 {
// B700-NEXT:     %d_h2 = grad.tanh %d_t2, %t2 {
// LIST-NEXT:     %d_h2 = grad.tanh %d_t2, %t2 {
// STORE-NEXT:    %d_r1 = grad.matmul_lhs %d_h2, %w2
// SQRT-NEXT:     %d_r1 = grad.matmul_lhs %d_h2, %w2
// B700-NEXT:     %d_r1 = grad.matmul_lhs %d_h2, %w2
// LIST-NEXT:     %d_r1 = grad.matmul_lhs %d_h2, %w2
// STORE-NEXT:    %d_w2 = grad.matmul_rhs %d_h2, %r1 {
// STORE-NEXT:    %d_h1 = grad.relu %d_r1, %r1 {
// SQRT-NEXT:     %h1_rc = nn.gemm %x, %w1 {trans_b = true, node = "/fc1/Gemm", phase = "recompute"}
// SQRT-NEXT:     %r1_rc = nn.relu %h1_rc {node = "/relu1/Relu", phase = "recompute"}
// SQRT-NEXT:     %d_w2 = grad.matmul_rhs %d_h2, %r1_rc {
// SQRT-NEXT:     %d_h1 = grad.relu %d_r1, %r1_rc {
// B700-NEXT:     %h1_rc = nn.gemm %x, %w1 {trans_b = true, node = "/fc1/Gemm", phase = "recompute"}
// B700-NEXT:     %r1_rc = nn.relu %h1_rc {node = "/relu1/Relu", phase = "recompute"}
// B700-NEXT:     %d_w2 = grad.matmul_rhs %d_h2, %r1_rc {
// B700-NEXT:     %d_h1 = grad.relu %d_r1, %r1_rc {
// LIST-NEXT:     %h1_rc = nn.gemm %x, %w1 {trans_b = true, node = "/fc1/Gemm", phase = "recompute"}
// LIST-NEXT:     %r1_rc = nn.relu %h1_rc {node = "/relu1/Relu", phase = "recompute"}
// LIST-NEXT:     %d_w2 = grad.matmul_rhs %d_h2, %r1_rc {
// LIST-NEXT:     %d_h1 = grad.relu %d_r1, %r1_rc {
// CHECK-NEXT:    %d_w1 = grad.matmul_rhs %d_h1, %x
// CHECK-NEXT:    func.return %loss, %d_w1, %d_w2, %d_w3
// STORE-NOT:     phase = "recompute"

// Optimizer ops are left alone, whichever pass runs first.
// OPT-LABEL:     func.func @step
// OPT:           %t2_rc = nn.tanh %h2_rc {node = "/tanh2/Tanh", phase = "recompute"}
// OPT:           train.sgd %w1, %d_w1 {lr = 1.000000e-03 : f64, node = "fc1.weight"}
// OPT-NEXT:      train.sgd %w2, %d_w2 {lr = 1.000000e-03 : f64, node = "fc2.weight"}
// OPT-NEXT:      train.sgd %w3, %d_w3 {lr = 1.000000e-03 : f64, node = "fc3.weight"}
// OPT-NEXT:      func.return %loss : tensor<f32>

// -----

// A value saved through a view: recomputing the relu clones the reshape too. The sigmoid's
// input %o is not saved, so recomputing %p recomputes %o from %v; the clones of one segment are
// shared (%v_rc serves that recomputation and the later weight gradient). sqrt and a budget of
// 700 bytes keep %p and recompute %r1 (and its view) only.

func.func @view(%x: tensor<4x8xf32> {monet.input = "x"},
                %w1: tensor<16x8xf32> {monet.param = "fc1.weight", monet.trainable},
                %w2: tensor<8x8xf32> {monet.param = "fc2.weight", monet.trainable},
                %labels: tensor<8xi64> {monet.input = "labels"})
    -> (tensor<f32> {monet.loss}, tensor<16x8xf32> {monet.grad = "fc1.weight"}, tensor<8x8xf32> {monet.grad = "fc2.weight"}) {
  %h1 = nn.gemm %x, %w1 {trans_b = true, node = "/fc1/Gemm"} : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %r1 = nn.relu %h1 {node = "/relu1/Relu"} : tensor<4x16xf32>
  %v = nn.reshape %r1 {node = "/Reshape"} : (tensor<4x16xf32>) -> tensor<8x8xf32>
  %o = nn.matmul %v, %w2 {node = "/MatMul"} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %p = nn.sigmoid %o {node = "/sig/Sigmoid"} : tensor<8x8xf32>
  %loss, %log_prob = nn.softmax_cross_entropy %p, %labels {reduction = "mean", node = "loss"} : (tensor<8x8xf32>, tensor<8xi64>)
    -> (tensor<f32>, tensor<8x8xf32>)
  %d_loss = nn.constant dense<1.000000e+00> : tensor<f32> {node = "loss", phase = "backward"}
  %d_p = grad.softmax_cross_entropy %d_loss, %log_prob, %labels {reduction = "mean", node = "loss"} : (tensor<f32>, tensor<8x8xf32>, tensor<8xi64>) -> tensor<8x8xf32>
  %d_o = grad.sigmoid %d_p, %p {node = "/sig/Sigmoid"} : tensor<8x8xf32>
  %d_v = grad.matmul_lhs %d_o, %w2 {node = "/MatMul"} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %d_w2 = grad.matmul_rhs %d_o, %v {node = "/MatMul"} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  %d_r1 = nn.reshape %d_v {node = "/Reshape", phase = "backward"} : (tensor<8x8xf32>) -> tensor<4x16xf32>
  %d_h1 = grad.relu %d_r1, %r1 {node = "/relu1/Relu"} : tensor<4x16xf32>
  %d_w1 = grad.matmul_rhs %d_h1, %x {trans_b = true, node = "/fc1/Gemm"} : (tensor<4x16xf32>, tensor<4x8xf32>) -> tensor<16x8xf32>
  func.return %loss, %d_w1, %d_w2 : tensor<f32>, tensor<16x8xf32>, tensor<8x8xf32>
}

// CHECK-LABEL: func.func @view
// CHECK:         %d_p = grad.softmax_cross_entropy %d_loss, %log_prob, %labels
// STORE-NEXT:    %d_o = grad.sigmoid %d_p, %p {
// SQRT-NEXT:     %d_o = grad.sigmoid %d_p, %p {
// B700-NEXT:     %d_o = grad.sigmoid %d_p, %p {
// ALL-NEXT:      %h1_rc = nn.gemm %x, %w1 {trans_b = true, node = "/fc1/Gemm", phase = "recompute"}
// ALL-NEXT:      %r1_rc = nn.relu %h1_rc {node = "/relu1/Relu", phase = "recompute"}
// ALL-NEXT:      %v_rc = nn.reshape %r1_rc {node = "/Reshape", phase = "recompute"} : (tensor<4x16xf32>) -> tensor<8x8xf32>
// ALL-NEXT:      %o_rc = nn.matmul %v_rc, %w2 {node = "/MatMul", phase = "recompute"}
// ALL-NEXT:      %p_rc = nn.sigmoid %o_rc {node = "/sig/Sigmoid", phase = "recompute"}
// ALL-NEXT:      %d_o = grad.sigmoid %d_p, %p_rc {
// B400-NEXT:     %h1_rc = nn.gemm %x, %w1 {trans_b = true, node = "/fc1/Gemm", phase = "recompute"}
// B400-NEXT:     %r1_rc = nn.relu %h1_rc {node = "/relu1/Relu", phase = "recompute"}
// B400-NEXT:     %v_rc = nn.reshape %r1_rc {node = "/Reshape", phase = "recompute"}
// B400-NEXT:     %o_rc = nn.matmul %v_rc, %w2 {node = "/MatMul", phase = "recompute"}
// B400-NEXT:     %p_rc = nn.sigmoid %o_rc {node = "/sig/Sigmoid", phase = "recompute"}
// B400-NEXT:     %d_o = grad.sigmoid %d_p, %p_rc {
// LIST-NEXT:     %h1_rc = nn.gemm %x, %w1 {trans_b = true, node = "/fc1/Gemm", phase = "recompute"}
// LIST-NEXT:     %r1_rc = nn.relu %h1_rc {node = "/relu1/Relu", phase = "recompute"}
// LIST-NEXT:     %v_rc = nn.reshape %r1_rc {node = "/Reshape", phase = "recompute"}
// LIST-NEXT:     %o_rc = nn.matmul %v_rc, %w2 {node = "/MatMul", phase = "recompute"}
// LIST-NEXT:     %p_rc = nn.sigmoid %o_rc {node = "/sig/Sigmoid", phase = "recompute"}
// LIST-NEXT:     %d_o = grad.sigmoid %d_p, %p_rc {
// CHECK-NEXT:    %d_v = grad.matmul_lhs %d_o, %w2
// STORE-NEXT:    %d_w2 = grad.matmul_rhs %d_o, %v {
// ALL-NEXT:      %d_w2 = grad.matmul_rhs %d_o, %v_rc {
// B400-NEXT:     %d_w2 = grad.matmul_rhs %d_o, %v_rc {
// LIST-NEXT:     %d_w2 = grad.matmul_rhs %d_o, %v_rc {
// SQRT-NEXT:     %h1_rc = nn.gemm %x, %w1 {trans_b = true, node = "/fc1/Gemm", phase = "recompute"}
// SQRT-NEXT:     %r1_rc = nn.relu %h1_rc {node = "/relu1/Relu", phase = "recompute"}
// SQRT-NEXT:     %v_rc = nn.reshape %r1_rc {node = "/Reshape", phase = "recompute"}
// SQRT-NEXT:     %d_w2 = grad.matmul_rhs %d_o, %v_rc {
// B700-NEXT:     %h1_rc = nn.gemm %x, %w1 {trans_b = true, node = "/fc1/Gemm", phase = "recompute"}
// B700-NEXT:     %r1_rc = nn.relu %h1_rc {node = "/relu1/Relu", phase = "recompute"}
// B700-NEXT:     %v_rc = nn.reshape %r1_rc {node = "/Reshape", phase = "recompute"}
// B700-NEXT:     %d_w2 = grad.matmul_rhs %d_o, %v_rc {
// CHECK-NEXT:    %d_r1 = nn.reshape %d_v {node = "/Reshape", phase = "backward"}
// STORE-NEXT:    %d_h1 = grad.relu %d_r1, %r1 {
// ALL-NEXT:      %d_h1 = grad.relu %d_r1, %r1_rc {
// SQRT-NEXT:     %d_h1 = grad.relu %d_r1, %r1_rc {
// B700-NEXT:     %d_h1 = grad.relu %d_r1, %r1_rc {
// B400-NEXT:     %d_h1 = grad.relu %d_r1, %r1_rc {
// LIST-NEXT:     %d_h1 = grad.relu %d_r1, %r1_rc {
// STORE-NOT:     phase = "recompute"
