// RUN: monet-opt %s --split-input-file -p autodiff | filecheck %s
// RUN: monet-opt %s --split-input-file -p 'autodiff{loss=mse labels=target reduction=sum}' | filecheck %s --check-prefix=MSE
// RUN: monet-opt %s --split-input-file -p 'autodiff,dce' | filecheck %s --check-prefix=DCE

// A two-layer perceptron: cross-entropy is appended, every trainable parameter gets a gradient,
// the data input gets none.
func.func @mlp(%x: tensor<4x8xf32> {monet.input = "x"}, %w1: tensor<16x8xf32> {monet.param = "fc1.weight", monet.trainable}, %b1: tensor<16xf32> {monet.param = "fc1.bias", monet.trainable}, %w2: tensor<3x16xf32> {monet.param = "fc2.weight", monet.trainable}) -> tensor<4x3xf32> {
  %h = nn.gemm %x, %w1, %b1 {trans_b = true, node = "/fc1/Gemm"} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %r = nn.relu %h {node = "/Relu"} : tensor<4x16xf32>
  %y = nn.gemm %r, %w2 {trans_b = true, node = "/fc2/Gemm"} : (tensor<4x16xf32>, tensor<3x16xf32>) -> tensor<4x3xf32>
  func.return %y : tensor<4x3xf32>
}

// CHECK-LABEL: func.func @mlp
// CHECK-SAME:    %labels: tensor<4xi64> {monet.input = "labels"})
// CHECK-SAME:    -> (tensor<f32> {monet.loss}, tensor<16x8xf32> {monet.grad = "fc1.weight"}, tensor<16xf32> {monet.grad = "fc1.bias"}, tensor<3x16xf32> {monet.grad = "fc2.weight"})
// CHECK:         %loss, %log_prob = nn.softmax_cross_entropy %y, %labels {reduction = "mean", node = "loss"} : (tensor<4x3xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4x3xf32>)
// CHECK-NEXT:    %d_loss = nn.constant dense<1.000000e+00> : tensor<f32> {node = "loss", phase = "backward"}
// CHECK-NEXT:    %d_y = grad.softmax_cross_entropy %d_loss, %log_prob, %labels {reduction = "mean", node = "loss"}
// CHECK-NEXT:    %d_r = grad.matmul_lhs %d_y, %w2 {trans_b = true, node = "/fc2/Gemm"} : (tensor<4x3xf32>, tensor<3x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT:    %d_w2 = grad.matmul_rhs %d_y, %r {trans_b = true, node = "/fc2/Gemm"} : (tensor<4x3xf32>, tensor<4x16xf32>) -> tensor<3x16xf32>
// CHECK-NEXT:    %d_h = grad.relu %d_r, %r {node = "/Relu"} : tensor<4x16xf32>
// CHECK-NOT:     grad.matmul_lhs %d_h
// CHECK-NEXT:    %d_w1 = grad.matmul_rhs %d_h, %x {trans_b = true, node = "/fc1/Gemm"}
// CHECK-NEXT:    %d_b1 = grad.unbroadcast %d_h {node = "/fc1/Gemm"} : (tensor<4x16xf32>) -> tensor<16xf32>
// CHECK-NEXT:    func.return %loss, %d_w1, %d_b1, %d_w2

// MSE-LABEL: func.func @mlp
// MSE-SAME:    %target: tensor<4x3xf32> {monet.input = "target"}
// MSE:         %loss = nn.mse_loss %y, %target {reduction = "sum", node = "loss"}
// MSE:         grad.mse_loss %d_loss, %y, %target {reduction = "sum", node = "loss"}

// DCE-LABEL: func.func @mlp
// DCE:         grad.matmul_rhs
// DCE:         grad.relu
// DCE:         grad.unbroadcast

// -----

// A residual block: the gradient of the value used twice is the sum of both contributions; the
// frozen parameter gets no gradient.
func.func @residual(%x: tensor<2x4xf32> {monet.input = "x"}, %w: tensor<4x4xf32> {monet.param = "w", monet.trainable}, %s: tensor<4xf32> {monet.param = "scale"}) -> tensor<2x4xf32> {
  %a = nn.matmul %x, %w {node = "/mm1"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %t = nn.tanh %a {node = "/tanh"} : tensor<2x4xf32>
  %m = nn.mul %t, %s {node = "/scale"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %sum = nn.add %m, %a {node = "/residual"} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  func.return %sum : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @residual
// CHECK-SAME:    -> (tensor<f32> {monet.loss}, tensor<4x4xf32> {monet.grad = "w"})
// CHECK:         %d_sum = grad.softmax_cross_entropy
// CHECK-NEXT:    %d_t = nn.mul %d_sum, %s {node = "/scale", phase = "backward"}
// CHECK-NEXT:    %[[DA:.*]] = grad.tanh %d_t, %t {node = "/tanh"} : tensor<2x4xf32>
// CHECK-NEXT:    %d_a_1 = nn.sum %d_sum, %[[DA]] {node = "/mm1", phase = "backward"}
// CHECK-NEXT:    %d_w = grad.matmul_rhs %d_a_1, %x {node = "/mm1"}
// CHECK-NEXT:    func.return %loss, %d_w
