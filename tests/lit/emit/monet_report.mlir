// -t monet-report: FLOPs per phase, memory by category and op counts of a training step, as JSON.
// RUN: monet-opt %s -t monet-report | filecheck %s
// RUN: monet-opt %s -p 'insert-optimizer{kind=momentum lr=0.1}' -t 'monet-report{per-op=true}' | filecheck %s --check-prefix=OPT

// A linear layer scaled by a non-trainable buffer, ReLU, MSE loss; forward and backward.
//   forward:  gemm 2x3 . 3x4 = 24 MACs -> 48; mul 8 + relu 8 + mse_loss 24 (8 elements x 3) = 40
//   backward: matmul_rhs 24 MACs -> 48; grad.mse_loss 8x2 + grad.relu 8 + mul 8 + unbroadcast 4x2 = 40
//   saved: activations %z (read by grad.relu) + %r (grad.mse_loss) = 64 B; inputs %x, %t = 56 B;
//          params: the buffer %s (read by the backward mul) = 16 B
builtin.module attributes {monet.source = "tiny.onnx"} {
  func.func @step(%x: tensor<2x3xf32> {monet.input = "x"}, %t: tensor<2x4xf32> {monet.input = "t"},
                  %w: tensor<4x3xf32> {monet.param = "fc.weight", monet.trainable},
                  %b: tensor<4xf32> {monet.param = "fc.bias", monet.trainable},
                  %s: tensor<4xf32> {monet.param = "scale"})
      -> (tensor<f32> {monet.loss}, tensor<4x3xf32> {monet.grad = "fc.weight"}, tensor<4xf32> {monet.grad = "fc.bias"}) {
    %y = nn.gemm %x, %w, %b {trans_b = true, node = "/fc/Gemm"} : (tensor<2x3xf32>, tensor<4x3xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %z = nn.mul %y, %s {node = "/Mul"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %r = nn.relu %z {node = "/Relu"} : tensor<2x4xf32>
    %loss = nn.mse_loss %r, %t {node = "/loss"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<f32>
    %one = nn.constant dense<1.000000e+00> : tensor<f32> {node = "/loss", phase = "backward"}
    %dr = grad.mse_loss %one, %r, %t {node = "/loss"} : (tensor<f32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %dz = grad.relu %dr, %z {node = "/Relu"} : tensor<2x4xf32>
    %dy = nn.mul %dz, %s {node = "/Mul", phase = "backward"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %dw = grad.matmul_rhs %dy, %x {trans_b = true, node = "/fc/Gemm"} : (tensor<2x4xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
    %db = grad.unbroadcast %dy {node = "/fc/Gemm"} : (tensor<2x4xf32>) -> tensor<4xf32>
    func.return %loss, %dw, %db : tensor<f32>, tensor<4x3xf32>, tensor<4xf32>
  }
}

// CHECK:      {
// CHECK-NEXT:   "flops": {
// CHECK-NEXT:     "backward": {
// CHECK-NEXT:       "matmul_conv": 48,
// CHECK-NEXT:       "other": 40
// CHECK-NEXT:     },
// CHECK-NEXT:     "forward": {
// CHECK-NEXT:       "matmul_conv": 48,
// CHECK-NEXT:       "other": 40
// CHECK-NEXT:     },
// CHECK-NEXT:     "optimizer": {
// CHECK-NEXT:       "matmul_conv": 0,
// CHECK-NEXT:       "other": 0
// CHECK-NEXT:     },
// CHECK-NEXT:     "recompute": {
// CHECK-NEXT:       "matmul_conv": 0,
// CHECK-NEXT:       "other": 0
// CHECK-NEXT:     }
// CHECK-NEXT:   },
// CHECK-NEXT:   "memory": {
// CHECK-NEXT:     "buffer_bytes": 16,
// CHECK-NEXT:     "gradient_bytes": 64,
// CHECK-NEXT:     "input_bytes": 56,
// CHECK-NEXT:     "optimizer_state_bytes": 0,
// CHECK-NEXT:     "parameter_bytes": 64,
// CHECK-NEXT:     "saved_activation_bytes": 64,
// CHECK-NEXT:     "saved_input_bytes": 56,
// CHECK-NEXT:     "saved_param_bytes": 16
// CHECK-NEXT:   },
// CHECK-NEXT:   "model": "tiny.onnx",
// CHECK-NEXT:   "ops": {
// CHECK-NEXT:     "backward": 6,
// CHECK-NEXT:     "forward": 4,
// CHECK-NEXT:     "optimizer": 0,
// CHECK-NEXT:     "recompute": 0
// CHECK-NEXT:   }
// CHECK-NEXT: }
// CHECK-NOT:  per_op

// After insert-optimizer{kind=momentum}: 16 parameter elements x 5 ops = 80 optimizer ops,
// 64 bytes of momentum buffers; the gradients are operands of the train ops now.
// OPT:        "optimizer": {
// OPT-NEXT:     "matmul_conv": 0,
// OPT-NEXT:     "other": 80
// OPT:        "memory": {
// OPT-NEXT:     "buffer_bytes": 16,
// OPT-NEXT:     "gradient_bytes": 64,
// OPT-NEXT:     "input_bytes": 56,
// OPT-NEXT:     "optimizer_state_bytes": 64,
// OPT:        "ops": {
// OPT-NEXT:     "backward": 6,
// OPT-NEXT:     "forward": 4,
// OPT-NEXT:     "optimizer": 2,
// OPT-NEXT:     "recompute": 0
// OPT-NEXT:   },
// OPT-NEXT:   "per_op": [
// OPT-NEXT:     {
// OPT-NEXT:       "matmul_conv": 48,
// OPT-NEXT:       "name": "/fc/Gemm",
// OPT-NEXT:       "op": "nn.gemm",
// OPT-NEXT:       "other": 0,
// OPT-NEXT:       "phase": "forward"
// OPT-NEXT:     },
// OPT-NEXT:     {
// OPT-NEXT:       "matmul_conv": 0,
// OPT-NEXT:       "name": "/Mul",
// OPT-NEXT:       "op": "nn.mul",
// OPT-NEXT:       "other": 8,
// OPT-NEXT:       "phase": "forward"
// OPT-NEXT:     },
// OPT:            "op": "grad.unbroadcast",
// OPT-NEXT:       "other": 8,
// OPT-NEXT:       "phase": "backward"
// OPT-NEXT:     },
// OPT-NEXT:     {
// OPT-NEXT:       "matmul_conv": 0,
// OPT-NEXT:       "name": "fc.weight",
// OPT-NEXT:       "op": "train.momentum",
// OPT-NEXT:       "other": 60,
// OPT-NEXT:       "phase": "optimizer"
// OPT-NEXT:     },
// OPT-NEXT:     {
// OPT-NEXT:       "matmul_conv": 0,
// OPT-NEXT:       "name": "fc.bias",
// OPT-NEXT:       "op": "train.momentum",
// OPT-NEXT:       "other": 20,
// OPT-NEXT:       "phase": "optimizer"
// OPT-NEXT:     }
// OPT-NEXT:   ]
// OPT-NEXT: }
