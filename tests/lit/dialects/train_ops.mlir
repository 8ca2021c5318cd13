// RUN: MONET_ROUNDTRIP
// RUN: MONET_GENERIC_ROUNDTRIP

func.func @step(%w: tensor<8x4xf32> {monet.param = "fc.weight", monet.trainable}, %m: tensor<8x4xf32> {monet.state = "fc.weight.exp_avg"}, %v: tensor<8x4xf32> {monet.state = "fc.weight.exp_avg_sq"}, %t: tensor<f32> {monet.state = "fc.weight.step"}, %mom: tensor<8x4xf32> {monet.state = "fc.weight.momentum_buffer"}, %g: tensor<8x4xf32>) {
  train.sgd %w, %g {lr = 1.000000e-02 : f64} : tensor<8x4xf32>, tensor<8x4xf32>
  train.momentum %w, %g, %mom {lr = 1.000000e-02 : f64, momentum = 9.000000e-01 : f64, nesterov = true} : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>
  train.adam %w, %g, %m, %v, %t {lr = 1.000000e-03 : f64, beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, eps = 1.000000e-08 : f64, node = "fc.weight"} : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<f32>
  train.adamw %w, %g, %m, %v, %t {lr = 1.000000e-03 : f64, weight_decay = 1.000000e-02 : f64} : tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<f32>
  train.accumulate %m, %g : tensor<8x4xf32>, tensor<8x4xf32>
  func.return
}

// CHECK-LABEL: func.func @step
// CHECK-SAME:    {monet.state = "fc.weight.exp_avg"}
// CHECK:       train.sgd %w, %g {lr = 1.000000e-02 : f64} : tensor<8x4xf32>, tensor<8x4xf32>
// CHECK:       train.momentum %w, %g, %mom {lr = 1.000000e-02 : f64, momentum = 9.000000e-01 : f64, nesterov = true}
// CHECK:       train.adam %w, %g, %m, %v, %t {lr = 1.000000e-03 : f64, beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, eps = 1.000000e-08 : f64, node = "fc.weight"}
// CHECK:       train.adamw %w, %g, %m, %v, %t {lr = 1.000000e-03 : f64, weight_decay = 1.000000e-02 : f64}
// CHECK:       train.accumulate %m, %g : tensor<8x4xf32>, tensor<8x4xf32>
// CHECK-GENERIC: "train.adam"(%w, %g, %m, %v, %t) <{lr = 1.000000e-03 : f64, beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, eps = 1.000000e-08 : f64, node = "fc.weight"}> : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<f32>) -> ()
